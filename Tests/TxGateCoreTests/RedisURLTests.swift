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
        let forms = "redis://[user:password@]host:port[/db] or redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]"
        #expect(error("http://h") == "'http://h' is not \(forms)")
        #expect(error("rediss://u:secret@h") == "'rediss://***@h' is not \(forms)")
        #expect(error("redis://h:port") == "port 'port' is not a number")
        #expect(error("redis://h:70000") == "port 70000 is out of range 1-65535")
        #expect(error("redis://h/x") == "database 'x' is not a number >= 0")
        #expect(error("redis://:pw@") == "no host in 'redis://***@'")
        #expect(error("redis://:p%zz@h") == "bad percent-encoding in the credentials")
        #expect(error("redis://[::1") == "unterminated IPv6 address '[::1'")
    }

    // MARK: redis+sentinel://

    @Test func sentinelFormsOperatorsWrite() throws {
        func sentinels(_ list: [(String, Int)]) -> [RedisURL.Address] { list.map { RedisURL.Address(host: $0.0, port: $0.1) } }
        #expect(try RedisURL(parsing: "redis+sentinel://host1:26379,host2:26380/mymaster")
            == RedisURL(server: .sentinel(master: "mymaster", sentinels: sentinels([("host1", 26379), ("host2", 26380)]))))
        // The sentinel port defaults to 26379, not 6379.
        #expect(try RedisURL(parsing: "redis+sentinel://s1,s2,s3/txgate/2")
            == RedisURL(server: .sentinel(master: "txgate", sentinels: sentinels([("s1", 26379), ("s2", 26379), ("s3", 26379)])), database: 2))
        #expect(try RedisURL(parsing: "redis+sentinel://txgate:p%40ss@[::1]:5000,10.0.0.2/m/")
            == RedisURL(server: .sentinel(master: "m", sentinels: sentinels([("::1", 5000), ("10.0.0.2", 26379)])),
                        username: "txgate", password: "p@ss"))
        #expect(try RedisURL(parsing: "redis+sentinel://secret@s/m").password == "secret")
        #expect(try RedisURL(parsing: "redis+sentinel://s/m").directAddress == nil)
        #expect(try RedisURL(parsing: "redis://h:1").directAddress == RedisURL.Address(host: "h", port: 1))
    }

    @Test func sentinelDescriptionListsEverySentinelAndNeverThePassword() throws {
        #expect(try RedisURL(parsing: "redis+sentinel://u:secret@a:1,[::1]:2/mymaster/3").description
            == "redis+sentinel://a:1,[::1]:2/mymaster/3")
        #expect(try RedisURL(parsing: "redis+sentinel://a/m").description == "redis+sentinel://a:26379/m/0")
    }

    @Test func badSentinelURLsNameThePartThatIsWrong() {
        func error(_ s: String) -> String {
            do { _ = try RedisURL(parsing: s); return "accepted" } catch { return "\(error)" }
        }
        let form = "redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]"
        #expect(error("redis+sentinel://u:secret@h1,h2") == "no master name in 'redis+sentinel://***@h1,h2': expected \(form)")
        #expect(error("redis+sentinel://h1,h2/") == "no master name in 'redis+sentinel://h1,h2/': expected \(form)")
        #expect(error("redis+sentinel:///m") == "no sentinel in 'redis+sentinel:///m': expected \(form)")
        #expect(error("redis+sentinel://h1,h2:x/m") == "sentinel 2 of 2 ('h2:x'): port 'x' is not a number")
        #expect(error("redis+sentinel://h1,,h3/m") == "sentinel 2 of 3 is empty (two commas, or a comma at an end)")
        #expect(error("redis+sentinel://h1,h2:99999/m") == "sentinel 2 of 2 ('h2:99999'): port 99999 is out of range 1-65535")
        #expect(error("redis+sentinel://h1:1,h1:1/m") == "sentinel 2 of 2: h1:1 is listed twice")
        #expect(error("redis+sentinel://h1/m/x") == "database 'x' is not a number >= 0")
        #expect(error("redis+sentinel://h1/my master") == "master name 'my master' has a space or a character that is not printable ASCII")
        #expect(error("redis+sentinel://:p%zz@h1/m") == "bad percent-encoding in the credentials")
    }
}
