import Dispatch
import EventHTTP
import Foundation
import Testing

@Suite struct EventLoopTests {
    /// A loop stopped before its thread got to run it still stops: the break is not lost
    /// (it was, when `stop` asked libevent directly: `event_base_loop` clears a break asked for
    /// before it starts, and a test server stopped right after it was made hung its test).
    @Test func aLoopStoppedBeforeItRunsReturnsFromRun() {
        let loop = EventLoop()
        let returned = DispatchSemaphore(value: 0)
        loop.stop()
        Thread {
            loop.run()
            returned.signal()
        }.start()
        #expect(returned.wait(timeout: .now() + 10) == .success, "run() did not return after stop()")
    }

    /// Stopped while running, from another thread, after the work queued before the stop.
    @Test func aRunningLoopStopsAfterTheWorkQueuedBeforeTheStop() {
        let loop = EventLoop()
        let returned = DispatchSemaphore(value: 0)
        let ran = DispatchSemaphore(value: 0)
        Thread {
            loop.run()
            returned.signal()
        }.start()
        loop.execute { ran.signal() }
        loop.stop()
        #expect(returned.wait(timeout: .now() + 10) == .success, "run() did not return after stop()")
        #expect(ran.wait(timeout: .now()) == .success, "the work queued before the stop ran")
    }
}
