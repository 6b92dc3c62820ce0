import EventHTTP

extension ServerExchange {
    /// A copy of the request body, for the endpoints and bindings that read it.
    var bodyBytes: [UInt8] { EvBuffer.bytes(body) }
}
