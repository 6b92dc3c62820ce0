import Foundation
import TestSupport

/// Self-signed certificates from the openssl CLI, and HTTPS requests through curl.
extension Testbed {
    /// Writes cert.pem and key.pem (CN=localhost, SAN IP:127.0.0.1 and DNS:localhost) into the
    /// temp dir.
    func makeSelfSignedCertificate(cert: String = "cert.pem", key: String = "key.pem") throws {
        let r = try runTool("openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1",
            "-keyout", dir.file(key).path, "-out", dir.file(cert).path,
        ], timeout: 60)
        guard r.status == 0 else { throw HarnessError("openssl req failed: \(r)") }
    }

    /// An HTTPS exchange through curl, verifying the server against `caFile` (no -k).
    func curl(_ urls: [String], caFile: String = "cert.pem", extra: [String] = [],
              timeout: Double = 20) throws -> CurlResult {
        let tag = UUID().uuidString.prefix(8)
        let headersFile = dir.file("curl-\(tag).headers")
        let bodyFile = dir.file("curl-\(tag).body")
        // One `--next` group per URL: each gets its own header and body file, and curl still
        // reuses its connection cache across groups.
        var args: [String] = []
        for (i, u) in urls.enumerated() {
            if i > 0 { args.append("--next") }
            args += ["-sS", "--max-time", "\(max(1, Int(timeout) - 2))", "--cacert", dir.file(caFile).path,
                     "-D", headersFile.path + ".\(i)", "-o", bodyFile.path + ".\(i)",
                     "-w", "%{http_code} %{num_connects}\\n"]
            args += extra
            args.append(u)
        }
        let r = try runTool("curl", args, timeout: timeout)
        var transfers: [CurlTransfer] = []
        let stats = r.stdout.split(separator: "\n")
        for (i, line) in stats.enumerated() {
            let f = line.split(separator: " ")
            let suffix = ".\(i)"
            let head = (try? String(contentsOf: URL(fileURLWithPath: headersFile.path + suffix), encoding: .utf8)) ?? ""
            let body = (try? Data(contentsOf: URL(fileURLWithPath: bodyFile.path + suffix))) ?? Data()
            transfers.append(CurlTransfer(status: Int(f.first ?? "") ?? 0,
                                          newConnections: Int(f.count > 1 ? f[1] : "") ?? -1,
                                          rawHeaders: head, body: [UInt8](body)))
        }
        return CurlResult(command: r, transfers: transfers)
    }
}

struct CurlTransfer {
    let status: Int
    /// curl's %{num_connects}: connections opened for this transfer (0 = reused).
    let newConnections: Int
    let rawHeaders: String
    let body: [UInt8]

    var bodyText: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? {
        for line in rawHeaders.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].caseInsensitiveCompare(name) == .orderedSame {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    func json() throws -> [String: Any] {
        guard let obj = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw HarnessError("not a JSON object: \(bodyText.prefix(300))")
        }
        return obj
    }
}

struct CurlResult {
    let command: CommandResult
    let transfers: [CurlTransfer]
}
