import Testing
@testable import HTTPCore

/// Status lines carry the reason phrase RFC 9110 gives each status (issue 24, item 8: the
/// gateway's 415 said "Status 415").
@Suite struct StatusReasonTests {
    @Test(arguments: [
        (200, "OK"), (201, "Created"), (204, "No Content"), (302, "Found"), (303, "See Other"), (307, "Temporary Redirect"),
        (308, "Permanent Redirect"), (400, "Bad Request"), (401, "Unauthorized"), (403, "Forbidden"), (404, "Not Found"),
        (405, "Method Not Allowed"), (406, "Not Acceptable"), (408, "Request Timeout"), (409, "Conflict"), (410, "Gone"),
        (411, "Length Required"), (413, "Content Too Large"), (414, "URI Too Long"), (415, "Unsupported Media Type"),
        (417, "Expectation Failed"), (422, "Unprocessable Content"), (428, "Precondition Required"), (429, "Too Many Requests"),
        (431, "Request Header Fields Too Large"), (500, "Internal Server Error"), (501, "Not Implemented"), (502, "Bad Gateway"),
        (503, "Service Unavailable"), (504, "Gateway Timeout"), (505, "HTTP Version Not Supported"),
    ])
    func registeredStatusesHaveTheirPhrase(code: Int, phrase: String) {
        #expect(HTTPStatus.reason(code) == phrase)
        #expect(HTTPStatus.isRegistered(code))
    }

    @Test func everyStatusOfRFC9110HasAPhrase() {
        let defined = [100, 101, 200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 305, 307, 308]
            + Array(400...417) + [421, 422, 426] + Array(500...505)
        for code in defined {
            #expect(HTTPStatus.isRegistered(code), "\(code) has no reason phrase")
            #expect(!HTTPStatus.reason(code).hasPrefix("Status "), "\(code)")
        }
    }

    @Test func anUnregisteredStatusStillGetsAPhrase() {
        #expect(HTTPStatus.reason(599) == "Status 599")
        #expect(!HTTPStatus.isRegistered(599))
    }
}
