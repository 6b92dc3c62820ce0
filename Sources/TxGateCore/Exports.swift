// The wire codecs (advices, callbacks, JSON, query encoding) live in TxGateWire, which the
// client library shares; everything that imports TxGateCore sees them as before.
@_exported import TxGateWire
