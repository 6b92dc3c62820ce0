import Testing
import TxGateCore

@Suite struct RedisURLTests {
    @Test func formsOperatorsWrite() throws {
        #expect(try RedisURL(parsing: "redis://127.0.0.1:6380/2") == RedisURL(host: "127.0.0.1", port: 6380, database: 2))
        #expect(try RedisURL(parsing: "redis://redis") == RedisURL(host: "redis"))
        #expect(try RedisURL(parsing: "redis://redis/") == RedisURL(host: "redis"))
        #expect(try RedisURL(parsing: "redis://:pw@h:1") == RedisURL(host: "h", port: 1, password: "pw"))
        #expect(try RedisURL(parsing: "redis://pw@h") == RedisURL(host: "h", password: "pw"))
        #expect(try RedisURL(parsing: "redis://txgate:p%40ss:w@h:6379/1") == RedisURL(host: "h", username: "txgate", password: "p@ss:w", database: 1))
        #expect(try RedisURL(parsing: "redis://[::1]:7000") == RedisURL(host: "::1", port: 7000))
    }

    @Test func descriptionNeverShowsThePassword() throws {
        #expect(try RedisURL(parsing: "redis://u:secret@h:1/3").description == "redis://h:1/3")
        #expect(try RedisURL(parsing: "redis://[::1]:7000").description == "redis://[::1]:7000/0")
    }

    @Test func badURLsSayWhatIsWrong() {
        func error(_ s: String) -> String {
            do { _ = try RedisURL(parsing: s); return "accepted" } catch { return "\(error)" }
        }
        #expect(error("http://h") == "'http://h' is not redis://[user:password@]host:port[/db]")
        #expect(error("rediss://u:secret@h") == "'rediss://***@h' is not redis://[user:password@]host:port[/db]")
        #expect(error("redis://h:port") == "port 'port' is not a number")
        #expect(error("redis://h:70000") == "port 70000 is out of range 1-65535")
        #expect(error("redis://h/x") == "database 'x' is not a number >= 0")
        #expect(error("redis://:pw@") == "no host in 'redis://***@'")
        #expect(error("redis://:p%zz@h") == "bad percent-encoding in the credentials")
        #expect(error("redis://[::1") == "unterminated IPv6 address '[::1'")
    }
}
