import Foundation
import TestSupport

/// A real nginx in front of TxGate's `/-/authz` (`auth_request`), the way docs/FORWARD-AUTH.md shows it:
/// `/am/` straight to TxGate, everything else to the backend once TxGate allows it.
enum Nginx {
    static var binary: URL {
        get throws {
            if let url = BinaryLocator.onPath("nginx") { return url }
            let sbin = URL(fileURLWithPath: "/usr/sbin/nginx")
            guard FileManager.default.isExecutableFile(atPath: sbin.path) else {
                throw HarnessError("nginx is not installed: run scripts/install-deps.sh (it installs nginx-light)")
            }
            return sbin
        }
    }

    /// The server block of docs/FORWARD-AUTH.md's example, for a gateway on `gateway` and a
    /// backend on `backend`.
    static func authRequestConfig(dir: URL, port: Int, gateway: Int, backend: Int) -> String {
        """
        worker_processes 1;
        daemon off;
        pid \(dir.path)/nginx.pid;
        error_log \(dir.path)/nginx-error.log warn;
        events { worker_connections 1024; }
        http {
          access_log off;
          client_body_temp_path \(dir.path)/nginx-body;
          proxy_temp_path \(dir.path)/nginx-proxy;
          upstream txgate { server 127.0.0.1:\(gateway); keepalive 16; }
          upstream backend { server 127.0.0.1:\(backend); keepalive 16; }
          server {
            listen 127.0.0.1:\(port);
            location = /_txgate_authz {
              internal;
              proxy_pass http://txgate/-/authz;
              proxy_http_version 1.1;
              proxy_set_header Connection "";
              proxy_pass_request_body off;
              proxy_set_header Content-Length "";
              proxy_set_header X-Original-URI $request_uri;
              proxy_set_header X-Original-Method $request_method;
            }
            location /am/ {
              proxy_pass http://txgate;
              proxy_http_version 1.1;
              proxy_set_header Connection "";
            }
            location / {
              auth_request /_txgate_authz;
              auth_request_set $txgate_user $upstream_http_x_txgate_user;
              auth_request_set $txgate_login $upstream_http_location;
              proxy_set_header X-TxGate-User $txgate_user;
              proxy_http_version 1.1;
              proxy_set_header Connection "";
              error_page 401 = @txgate_401;
              proxy_pass http://backend;
            }
            location @txgate_401 {
              if ($txgate_login) { return 302 $txgate_login; }
              return 401;
            }
          }
        }
        """
    }

    /// Starts nginx with `config` from the testbed and waits for its port. It is stopped with
    /// SIGTERM (the master stops its workers, which a SIGKILL of the master would orphan).
    static func start(_ bed: Testbed, port: Int, config: String) throws -> SpawnedProcess {
        let url = try bed.dir.write("nginx.conf", config)
        let p = try bed.spawn(try binary, ["-c", url.path, "-e", bed.dir.url.appendingPathComponent("nginx-start.log").path],
                              name: "nginx", stopSignal: SIGTERM)
        try p.waitForPort(port)
        return p
    }
}
