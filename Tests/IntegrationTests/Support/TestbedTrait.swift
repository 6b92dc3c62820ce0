import Testing
import TestSupport

extension Testbed {
    /// The testbed of the running test, set by the `.testbed` trait.
    @TaskLocal static var scoped: Testbed?

    /// The running test's testbed; its processes are killed and its folder removed when the
    /// test ends, pass or fail.
    static var current: Testbed {
        get throws {
            guard let bed = scoped else { throw HarnessError("no testbed: add the .testbed trait to the suite") }
            return bed
        }
    }
}

/// `@Suite(.testbed)`: each test of the suite runs with a fresh `Testbed.current`, cleaned up
/// when it ends.
struct TestbedTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        guard !test.isSuite else { return try await function() }
        let bed = try Testbed()
        defer { bed.cleanup() }
        try await Testbed.$scoped.withValue(bed) { try await function() }
    }
}

extension Trait where Self == TestbedTrait {
    /// A fresh `Testbed.current` for each test.
    static var testbed: Self { TestbedTrait() }
}
