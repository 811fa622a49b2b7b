package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// nginxConfigTemplate is a private nginx: one worker on a loopback port,
// every file (config, pid, logs, temp, documents) under its own directory,
// and the access log in a format the fleet simulation sums up. /status/
// accepts WebDAV PUTs of status reports. Placeholders: user line, dir,
// port, extra server directives.
const nginxConfigTemplate = `%s
worker_processes 1;
error_log %[2]s/error.log warn;
pid %[2]s/nginx.pid;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
	log_format fleet '$msec $request_method $status $request_length $bytes_sent $uri';
	access_log %[2]s/access.log fleet;
	client_body_temp_path %[2]s/tmp/body;
	proxy_temp_path %[2]s/tmp/proxy;
	fastcgi_temp_path %[2]s/tmp/fastcgi;
	uwsgi_temp_path %[2]s/tmp/uwsgi;
	scgi_temp_path %[2]s/tmp/scgi;
	types { application/yaml yaml; application/json json; }
	default_type application/octet-stream;
	keepalive_timeout 120s;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:%[3]d;
		root %[2]s/www;
		location /status/ {
			dav_methods PUT;
			create_full_put_path on;
			dav_access user:rw group:r all:r;
			client_max_body_size 64k;
		}
%[4]s
	}
}
`

// NginxOptions configures StartNginx.
type NginxOptions struct {
	// ServerDirectives are added to the server block, e.g. an
	// add_header Cache-Control.
	ServerDirectives string
}

// Nginx is a private nginx (Debian's package, installed by install.sh)
// serving Root over plain HTTP on a loopback port and accepting status
// reports PUT under /status/ (stored in Root/status).
type Nginx struct {
	// Addr is host:port; URL is http://Addr.
	Addr, URL string
	// Root is the document root: files written there are served.
	Root string
	dir  string
	proc *process
}

// StartNginx starts an nginx whose files all live in dir (a directory the
// caller owns, e.g. a test's temp dir), without touching the system's
// nginx or its service. Run as root, its worker runs as root too: it
// serves and stores files in a private root-owned directory on loopback
// only, which an unprivileged worker could not read.
func StartNginx(dir string, opt NginxOptions) (*Nginx, error) {
	for _, d := range []string{"www/status", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("nginx dir: %w", err)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root root;"
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConfigTemplate, user, dir, port, opt.ServerDirectives), 0o644); err != nil {
		return nil, fmt.Errorf("write nginx config: %w", err)
	}
	p, err := startProcess(filepath.Join(dir, "nginx.out"), nil, "nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"),
		"-g", "daemon off;", "-c", conf)
	if err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	n := &Nginx{Addr: "127.0.0.1:" + strconv.Itoa(port), Root: filepath.Join(dir, "www"), dir: dir, proc: p}
	n.URL = "http://" + n.Addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", n.Addr, time.Second)
		if err == nil {
			c.Close()
			return n, nil
		}
		if !p.alive() || time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			_ = p.stop(5 * time.Second)
			return nil, fmt.Errorf("nginx did not listen on %s: %w; error.log: %s", n.Addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops nginx and waits until it is gone.
func (n *Nginx) Stop() error { return n.proc.stop(5 * time.Second) }

// Publish writes a document atomically (temp file and rename, as an
// operator's deploy should), so nginx never serves half of it.
func (n *Nginx) Publish(path string, data []byte) error {
	dst := filepath.Join(n.Root, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	return nil
}

// AccessEntry is one line of the access log.
type AccessEntry struct {
	At                time.Time
	Method, URI       string
	Status            int
	BytesIn, BytesOut int64 // request and response, headers included
}

// AccessLog reads the access log so far.
func (n *Nginx) AccessLog() ([]AccessEntry, error) {
	f, err := os.Open(filepath.Join(n.dir, "access.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	defer f.Close()
	var out []AccessEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		e, err := parseAccessLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("access log: %w", err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// parseAccessLine reads one line of the fleet log format.
func parseAccessLine(line string) (AccessEntry, error) {
	f := strings.Fields(line)
	if len(f) != 6 {
		return AccessEntry{}, fmt.Errorf("line %q: want 6 fields", line)
	}
	msec, err1 := strconv.ParseFloat(f[0], 64)
	status, err2 := strconv.Atoi(f[2])
	in, err3 := strconv.ParseInt(f[3], 10, 64)
	out, err4 := strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return AccessEntry{}, fmt.Errorf("line %q: %w", line, err)
	}
	sec := int64(msec)
	return AccessEntry{At: time.Unix(sec, int64((msec-float64(sec))*1e9)), Method: f[1], Status: status,
		BytesIn: in, BytesOut: out, URI: f[5]}, nil
}
