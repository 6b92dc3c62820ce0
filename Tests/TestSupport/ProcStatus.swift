import Foundation

/// A process's or thread's `/proc/.../status` file.
public enum ProcStatus {
    /// The value of the field `name` ("Cpus_allowed_list", "SigBlk"), trimmed; nil if the file
    /// cannot be read or has no such field.
    public static func field(_ name: String, in path: String) -> String? {
        guard let text = read(path), let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)
    }

    /// A /proc file's text, to its end (nil if it cannot be read): Foundation's
    /// `String(contentsOfFile:)` and `Data(contentsOf:)` stop at 4 KiB for a file whose size the
    /// kernel gives as 0, as it does for all of /proc.
    public static func read(_ path: String) -> String? {
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        do { return String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self) } catch { return nil }
    }

    /// The CPUs the process or thread may run on (`Cpus_allowed_list`, "0-3,8"), as written.
    public static func cpus(_ path: String) -> String? {
        field("Cpus_allowed_list", in: path)
    }

    /// A CPU list in that notation as CPU numbers.
    public static func numbers(_ list: String) -> [Int] {
        list.split(separator: ",").flatMap { part -> [Int] in
            let bounds = part.split(separator: "-").compactMap { Int($0) }
            return bounds.count == 2 ? Array(bounds[0]...bounds[1]) : bounds
        }
    }
}
