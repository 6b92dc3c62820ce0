import Foundation
import TestSupport

/// A real browser for the tests: Debian's headless Chromium, driven step by step by
/// `Tests/IntegrationTests/browser/drive.py` (selenium + /usr/bin/chromedriver). Each
/// `Testbed.runBrowser` call is one fresh browser (new profile, no cookies) that opens a URL,
/// runs the steps and reports where it ended. scripts/install-deps.sh installs all of it.
enum Browser {
    static let chromium = "/usr/bin/chromium"
    static let chromedriver = "/usr/bin/chromedriver"

    /// The driver script, next to the tests.
    static let driverScript = BinaryLocator.packageRoot.appendingPathComponent("Tests/IntegrationTests/browser/drive.py")

    /// Whether Chromium and its driver are installed (the tests' `.enabled(if:)` condition).
    static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: chromium) && FileManager.default.isExecutableFile(atPath: chromedriver)
    }

    static let notInstalled = "chromium and chromium-driver are not installed (run scripts/install-deps.sh)"
}

/// One step of a browser run (drive.py's step objects). Waits poll until they hold or time out.
enum BrowserStep: Sendable, CustomStringConvertible {
    /// Types `value` into the element (cleared first).
    case fill(_ css: String, _ value: String)
    /// Clicks the element once it is visible and enabled.
    case click(_ css: String)
    case waitForElement(_ css: String, timeout: Double? = nil)
    case waitUntilGone(_ css: String, timeout: Double? = nil)
    /// Until `location.pathname` is exactly `path`.
    case waitForPath(_ path: String, timeout: Double? = nil)
    case waitForURLContaining(_ text: String, timeout: Double? = nil)
    /// Until the page's text (or the text of the elements matching `css`) contains `text`.
    case waitForText(_ text: String, in: String? = nil, timeout: Double? = nil)
    /// Lets the page run for a while (at most 10 s), e.g. to see that nothing else happens.
    case pause(_ seconds: Double)
    /// Records the URL, text, navigation timing and `document.cookie` under `name`.
    case snapshot(_ name: String)
    /// Navigates the same browser (same cookies) to another URL.
    case open(_ url: String)
    case reload
    /// Saves a PNG of the page as it is now.
    case screenshot(_ file: URL)
    /// Waits for a file matching `glob` whose text matches `pattern`, and types the pattern's
    /// first group into the element (a code from an email in an outbox folder).
    case fillFromFile(_ css: String, glob: String, pattern: String)
    /// Opens `url` in a new tab of the same browser (same cookies) and goes on in that tab.
    case newTab(_ url: String)
    /// Goes on in tab `index` (0 is the first, in the order they were opened).
    case switchTab(_ index: Int)
    /// Waits for a file matching `glob` whose text matches `pattern`, and opens the pattern's
    /// first group as a URL (a link from an email in an outbox folder), in a new tab if `inNewTab`.
    case openFromFile(glob: String, pattern: String, inNewTab: Bool = false)
    /// Emulates a phone in this tab: a mobile viewport of `width` x `height` CSS pixels (device
    /// pixel ratio 2, touch). `.desktop` ends it.
    case viewport(width: Int, height: Int)
    case desktop
    /// Gives this tab Chromium's virtual WebAuthn authenticator (CTAP2, internal); `uv`: it
    /// verifies the person; `resident`: discoverable credentials. The run then reports its
    /// credentials (`BrowserRun.credentials`).
    case virtualAuthenticator(uv: Bool, resident: Bool = true)
    /// Forgets every cookie (signed out); a virtual authenticator stays.
    case clearCookies

    /// A common phone's viewport (390 x 844 CSS pixels).
    static let phone = BrowserStep.viewport(width: 390, height: 844)

    var json: [String: Any] {
        func with(_ base: [String: Any], _ timeout: Double?) -> [String: Any] {
            var b = base
            if let timeout { b["timeout"] = timeout }
            return b
        }
        switch self {
        case let .fill(css, value): return ["fill": css, "value": value]
        case let .click(css): return ["click": css]
        case let .waitForElement(css, t): return with(["wait_element": css], t)
        case let .waitUntilGone(css, t): return with(["wait_gone": css], t)
        case let .waitForPath(path, t): return with(["wait_path": path], t)
        case let .waitForURLContaining(text, t): return with(["wait_url_contains": text], t)
        case let .waitForText(text, css, t):
            var b: [String: Any] = ["wait_text": text]
            if let css { b["in"] = css }
            return with(b, t)
        case let .pause(s): return ["pause": s]
        case let .snapshot(name): return ["snapshot": name]
        case let .open(url): return ["open": url]
        case .reload: return ["reload": true]
        case let .screenshot(file): return ["screenshot": file.path]
        case let .fillFromFile(css, glob, pattern): return ["fill_from_file": css, "glob": glob, "pattern": pattern]
        case let .newTab(url): return ["new_tab": url]
        case let .switchTab(n): return ["switch_tab": n]
        case let .openFromFile(glob, pattern, inNewTab): return ["open_from_file": glob, "pattern": pattern, "in_new_tab": inNewTab]
        case let .viewport(w, h): return ["viewport": "\(w)x\(h)"]
        case .desktop: return ["viewport": "desktop"]
        case let .virtualAuthenticator(uv, resident): return ["virtual_authenticator": ["uv": uv, "resident": resident]]
        case .clearCookies: return ["clear_cookies": true]
        }
    }

    var description: String {
        if case let .fill(css, value) = self { return "fill \(css) with \(String(repeating: "*", count: value.count))" }
        let data = (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// A cookie as the browser holds it.
struct BrowserCookie: CustomStringConvertible {
    let name: String
    let value: String
    let domain: String
    let path: String
    let httpOnly: Bool
    let secure: Bool
    let sameSite: String?

    init(_ o: [String: Any]) {
        name = o["name"] as? String ?? ""
        value = o["value"] as? String ?? ""
        domain = o["domain"] as? String ?? ""
        path = o["path"] as? String ?? ""
        httpOnly = o["httpOnly"] as? Bool ?? false
        secure = o["secure"] as? Bool ?? false
        sameSite = o["sameSite"] as? String
    }

    var description: String {
        "\(name)=\(value.prefix(8))… domain=\(domain) path=\(path)\(httpOnly ? " HttpOnly" : "")\(secure ? " Secure" : "") SameSite=\(sameSite ?? "-")"
    }
}

/// A document response (or redirect) the browser saw, from Chromium's network log.
struct BrowserResponse: CustomStringConvertible {
    let url: String
    let status: Int
    /// The Location header, for a redirect.
    let location: String?
    /// "Document", "Fetch", "XHR".
    let type: String?

    var description: String { "\(status) \(type ?? "?") \(url)" + (location.map { " → \($0)" } ?? "") }
}

/// What the page looked like at a `.snapshot(name)` step.
struct BrowserSnapshot {
    let url: String
    let path: String
    let text: String
    let documentCookie: String
    /// PerformanceNavigationTiming.redirectCount of the current document.
    let redirectCount: Int?

    init(_ o: [String: Any]) {
        url = o["url"] as? String ?? ""
        path = o["path"] as? String ?? ""
        text = o["text"] as? String ?? ""
        documentCookie = o["document_cookie"] as? String ?? ""
        redirectCount = ((o["navigation"] as? [String: Any])?["redirectCount"] as? NSNumber)?.intValue
    }
}

/// The outcome of one browser run (drive.py's JSON result).
struct BrowserRun: CustomStringConvertible {
    /// Every step done.
    let ok: Bool
    /// Why not (the step, what did not happen, where the browser was).
    let error: String?
    let exitStatus: Int32
    let url: String
    let path: String
    let title: String
    /// The final page's `document.body.innerText`.
    let text: String
    let cookies: [BrowserCookie]
    /// `document.cookie` on the final page: what the page's script can read.
    let documentCookie: String
    /// Every browser console entry (`level`, `source`, `message`).
    let console: [[String: Any]]
    let network: [BrowserResponse]
    let snapshots: [String: BrowserSnapshot]
    /// The virtual authenticator's credentials at the end (`id`, `rp_id`, `sign_count`, `resident`).
    let credentials: [[String: Any]]
    let stderr: String

    init(json o: [String: Any], exitStatus: Int32, stderr: String) {
        ok = o["ok"] as? Bool ?? false
        error = o["error"] as? String
        self.exitStatus = exitStatus
        url = o["url"] as? String ?? ""
        path = o["path"] as? String ?? ""
        title = o["title"] as? String ?? ""
        text = o["text"] as? String ?? ""
        cookies = (o["cookies"] as? [[String: Any]] ?? []).map(BrowserCookie.init)
        documentCookie = o["document_cookie"] as? String ?? ""
        console = o["console"] as? [[String: Any]] ?? []
        network = (o["network"] as? [[String: Any]] ?? []).map {
            BrowserResponse(url: $0["url"] as? String ?? "", status: ($0["status"] as? NSNumber)?.intValue ?? 0,
                            location: $0["location"] as? String, type: $0["type"] as? String)
        }
        snapshots = (o["snapshots"] as? [String: [String: Any]] ?? [:]).mapValues(BrowserSnapshot.init)
        credentials = o["credentials"] as? [[String: Any]] ?? []
        self.stderr = stderr
    }

    func cookie(_ name: String) -> BrowserCookie? { cookies.first { $0.name == name } }

    /// The console's errors (level SEVERE) as "source: message".
    var consoleErrors: [String] {
        console.filter { $0["level"] as? String == "SEVERE" }
            .map { "\($0["source"] as? String ?? "?"): \($0["message"] as? String ?? "")" }
    }

    /// Console errors other than the browser's own "Failed to load resource: 4xx" lines, which a
    /// page gets whenever the server answers an error status it expects (a refused login).
    var scriptErrors: [String] { consoleErrors.filter { !$0.hasPrefix("network:") } }

    var description: String {
        """
        browser run \(ok ? "ok" : "FAILED") (exit \(exitStatus))\(error.map { ": \($0)" } ?? "")
          at \(url) — title '\(title)'
          text: \(text.count > 600 ? String(text.prefix(600)) + "…" : text)
          cookies: \(cookies.map(\.description).joined(separator: "; "))
          console: \(console.isEmpty ? "(empty)" : console.map { "\($0["level"] ?? "?") \($0["source"] ?? "?"): \($0["message"] ?? "")" }.joined(separator: "\n           "))
          network: \(network.map(\.description).joined(separator: "\n           "))
        """ + (stderr.isEmpty ? "" : "\n  stderr: \(stderr.suffix(1500))")
    }
}

extension Testbed {
    /// Opens `url` in a fresh headless Chromium, runs `steps`, and returns where it ended: the
    /// run is returned also when a step failed (`ok` false, `error` says which and why), so a
    /// test can `#expect(run.ok, "\(run)")`. Throws only if the driver gave no result at all.
    /// The whole run is bounded by `timeout` (drive.py kills the browser then); each wait by
    /// `stepTimeout`.
    func runBrowser(_ url: String, _ steps: [BrowserStep], timeout: Double = 45, stepTimeout: Double = 10,
                    screenshot: URL? = nil) throws -> BrowserRun {
        let stepsData = try JSONSerialization.data(withJSONObject: steps.map(\.json), options: [.prettyPrinted])
        let stepsFile = try dir.write("browser-steps-\(UUID().uuidString.prefix(8)).json", data: stepsData)
        var arguments = [Browser.driverScript.path, "--timeout", "\(timeout)", "--step-timeout", "\(stepTimeout)",
                         "--steps-file", stepsFile.path]
        if let screenshot { arguments += ["--screenshot", screenshot.path] }
        arguments.append(url)
        // drive.py ends itself at `timeout` (and kills chromium); the margin is for the rest.
        let r = try runTool("python3", arguments, timeout: timeout + 20)
        guard let data = r.stdout.data(using: .utf8),
              let obj = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw HarnessError("drive.py gave no JSON result (\(r))")
        }
        return BrowserRun(json: obj, exitStatus: r.status, stderr: r.stderr)
    }
}
