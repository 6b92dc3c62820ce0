import Foundation

/// One problem in a configuration file, named by its JSON path.
public struct ConfigError: Error, Equatable, CustomStringConvertible, Sendable {
    public let path: String
    public let message: String
    public init(path: String, message: String) { self.path = path; self.message = message }
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Every error found in a configuration, so that `txgate check` can print all of them.
public struct ConfigErrors: Error, CustomStringConvertible, Sendable {
    public let errors: [ConfigError]
    public init(errors: [ConfigError]) { self.errors = errors }
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// Collects errors while decoding, so that one bad key does not hide the next.
// @unchecked Sendable: JSONDecoder's userInfo holds Sendable values only; each instance lives
// inside one synchronous decode, on one thread, and is read after it returns.
final class ConfigIssues: @unchecked Sendable {
    var errors: [ConfigError] = []
    func add(_ path: [CodingKey], _ message: String) { errors.append(ConfigError(path: jsonPath(path), message: message)) }

    func add(_ error: Error, at fallback: [CodingKey]) {
        guard let e = error as? DecodingError else { add(fallback, "\(error)"); return }
        switch e {
        case .typeMismatch(let type, let ctx):
            add(ctx.codingPath, "wrong type: expected \(typeName(type))")
        case .valueNotFound(let type, let ctx):
            add(ctx.codingPath, "must not be null: expected \(typeName(type))")
        case .keyNotFound(let key, let ctx):
            add(ctx.codingPath + [key], "required key is missing")
        case .dataCorrupted(let ctx):
            add(ctx.codingPath, ctx.debugDescription)
        @unknown default:
            add(fallback, "\(error)")
        }
    }

    static let userInfoKey = CodingUserInfoKey(rawValue: "txgate.configIssues")!
}

func typeName(_ type: Any.Type) -> String {
    switch type {
    case is Int.Type, is Int64.Type, is UInt16.Type: return "an integer"
    case is Double.Type: return "a number"
    case is String.Type: return "a string"
    case is Bool.Type: return "true or false"
    case is [String].Type: return "an array of strings"
    default:
        let name = String(describing: type)
        if name.hasPrefix("Array") { return "an array" }
        return name.hasPrefix("Dictionary") || name.hasSuffix("Config") ? "an object" : name
    }
}

/// `upstream.connectTimeoutMs`, `policies[2].name`.
func jsonPath(_ keys: [CodingKey]) -> String {
    var s = ""
    for k in keys {
        if let i = k.intValue { s += "[\(i)]" } else { s += s.isEmpty ? k.stringValue : ".\(k.stringValue)" }
    }
    return s
}

struct AnyKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(_ s: String) { stringValue = s; intValue = nil }
    init?(stringValue: String) { self.init(stringValue) }
    init?(intValue: Int) { stringValue = String(intValue); self.intValue = intValue }
}

/// The keys of one object of gateway.json, one case each: declared once, where the type that
/// reads the object is. Its decoder reads its values by these cases (a key it has not declared
/// does not compile), and `StrictObject` refuses every key that is not one of them.
protocol ConfigKey: CaseIterable, RawRepresentable, Sendable where RawValue == String {}

/// A type decoded from one object of gateway.json through `StrictObject`, by the keys `Key` declares.
protocol ConfigObject: Decodable {
    associatedtype Key: ConfigKey
}

/// A JSON object that rejects keys its type does not declare and records, rather than throws,
/// the errors of its fields.
struct StrictObject<Key: ConfigKey> {
    let container: KeyedDecodingContainer<AnyKey>
    let issues: ConfigIssues
    let path: [CodingKey]

    init(_ decoder: Decoder, keys: Key.Type) throws {
        guard let issues = decoder.userInfo[ConfigIssues.userInfoKey] as? ConfigIssues else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "decode configuration through ConfigLoader"))
        }
        self.issues = issues
        self.path = decoder.codingPath
        container = try decoder.container(keyedBy: AnyKey.self)
        for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue })
        where Key(rawValue: key.stringValue) == nil {
            issues.add(path + [key], "unknown key")
        }
    }

    func has(_ key: Key) -> Bool { container.contains(AnyKey(key.rawValue)) }

    func optional<T: Decodable>(_ key: Key, as type: T.Type = T.self) -> T? {
        let k = AnyKey(key.rawValue)
        guard container.contains(k) else { return nil }
        do {
            if try container.decodeNil(forKey: k) { return nil }
            return try container.decode(T.self, forKey: k)
        } catch {
            issues.add(error, at: path + [k])
            return nil
        }
    }

    /// The value if it decodes as `T`, recording nothing otherwise (for keys that take one of
    /// several types).
    func attempt<T: Decodable>(_ key: Key, as type: T.Type = T.self) -> T? {
        try? container.decode(T.self, forKey: AnyKey(key.rawValue))
    }

    func value<T: Decodable>(_ key: Key, default fallback: T) -> T {
        optional(key, as: T.self) ?? fallback
    }

    /// A list of addresses or CIDR ranges; each bad entry is an error naming its index.
    func cidrs(_ key: Key) -> [CIDR]? {
        guard let list: [String] = optional(key) else { return nil }
        var ranges: [CIDR] = []
        for (i, text) in list.enumerated() {
            do { ranges.append(try CIDR(parsing: text)) } catch {
                invalid(key, index: i, error.description)
            }
        }
        return ranges
    }

    /// A whole number that must be at least `minimum` (an error names the key otherwise).
    func int(_ key: Key, default fallback: Int, atLeast minimum: Int) -> Int {
        let n = value(key, default: fallback)
        if n < minimum {
            invalid(key, minimum == 0 ? "must be 0 or more" : minimum == 1 ? "must be greater than 0" : "must be at least \(minimum)")
        }
        return n
    }

    func required<T: Decodable>(_ key: Key, as type: T.Type = T.self) -> T? {
        guard has(key) else {
            invalid(key, "required key is missing")
            return nil
        }
        return optional(key, as: type)
    }

    /// Records a bad value at `key`.
    func invalid(_ key: Key, _ message: String) {
        issues.add(path + [AnyKey(key.rawValue)], message)
    }

    /// Records a bad value at entry `index` of the list at `key`.
    func invalid(_ key: Key, index: Int, _ message: String) {
        issues.add(path + [AnyKey(key.rawValue), AnyKey(intValue: index)!], message)
    }
}
