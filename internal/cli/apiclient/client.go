package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Options are what a Client is built from.
type Options struct {
	// Socket is the daemon's unix socket.
	Socket string
	// Timeout is the bound the caller puts on each request's context; a
	// request that runs out says so in these words.
	Timeout time.Duration
}

// Client talks to the berth daemon's local API over its unix socket, the
// only place it serves logs and the place whose permissions (0660) say who
// may look. It holds no state of its own beyond its HTTP connections, so
// one Client may serve concurrent requests.
type Client struct {
	socket  string
	timeout time.Duration
	http    *http.Client
}

// New builds a Client of the socket o names; it dials only when asked.
func New(o Options) *Client {
	socket := o.Socket
	return &Client{socket: socket, timeout: o.Timeout, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, err
			}
			if err := checkPeer(c, os.Geteuid()); err != nil {
				c.Close()
				return nil, fmt.Errorf("%s: %w", socket, err)
			}
			return c, nil
		},
	}}}
}

// checkPeer refuses a socket served by a process of another user than root
// or the caller. The daemon creates its socket only in a directory nobody
// else can write to, but the CLI may be pointed anywhere (--socket,
// BERTH_SOCKET): root's CLI must not hand what it asks, or trust what it
// is told, to a process another user runs in berth's place. The kernel's
// record of who listens (SO_PEERCRED) is checked, not the socket file's
// owner, which a rename could change between the check and the connect.
func checkPeer(c net.Conn, euid int) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if !trustedPeer(int(cred.Uid), euid) {
		return fmt.Errorf("the process serving this socket (pid %d) runs as uid %d, not root: it is not the berth daemon; refusing to talk to it", cred.Pid, cred.Uid)
	}
	return nil
}

// trustedPeer: the daemon runs as root; a caller may also talk to a berth
// of its own (a test bed run without root).
func trustedPeer(peer, euid int) bool {
	return peer == 0 || peer == euid
}

// Socket is the unix socket c talks to.
func (c *Client) Socket() string { return c.socket }

// Get fetches path and returns the response when it is 200; any other
// answer becomes an error carrying the daemon's own message. The caller
// closes the response's body.
func (c *Client) Get(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := "http://berth" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		text := strings.TrimSpace(string(msg))
		if resp.StatusCode == http.StatusNotFound && text == "404 page not found" {
			// net/http's own answer for a path nobody serves, not a
			// pod the daemon did not find.
			text = fmt.Sprintf("the daemon at %s does not serve %s: it is older than this berth", c.socket, path)
		}
		return nil, &apiError{status: resp.StatusCode, msg: text}
	}
	return resp, nil
}

// GetJSON fetches path and decodes the answer into v.
func (c *Client) GetJSON(ctx context.Context, path string, v any) error {
	resp, err := c.Get(ctx, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode the answer to %s from %s: %w", path, c.socket, err)
	}
	return nil
}

// apiError is a non-200 answer of the daemon; its message is the daemon's.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("berth answered %d %s", e.status, http.StatusText(e.status))
	}
	return e.msg
}

// dialError says why the daemon could not be reached, in terms of what the
// operator can do about it.
func (c *Client) dialError(err error) error {
	prefix := fmt.Sprintf("berth daemon not reachable at %s", c.socket)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: no socket there: is berth running? (systemctl status berth; or pass --socket or set BERTH_SOCKET)", prefix)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%s: permission denied: the socket is mode 0660: run as root (sudo berth ...) or as a member of the socket's group", prefix)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s: connection refused: the socket is left over from a berth that is not running any more (systemctl status berth)", prefix)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("berth daemon at %s did not answer within %s: is it stuck? (journalctl -u berth)", c.socket, c.timeout)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// WatchEvent is one line of a watch: the Kubernetes API's shape,
// {"type":"ADDED|MODIFIED|DELETED","object":{...}}, or type ERROR with a
// metav1.Status as object.
type WatchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Watch streams path?watch=true (with query) and hands fn each event until
// ctx ends (nil), fn fails, or the daemon ends the stream (an error: a
// watch the operator did not stop ended under them).
func (c *Client) Watch(ctx context.Context, path string, query url.Values, fn func(WatchEvent) error) error {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("watch", "true")
	resp, err := c.Get(ctx, path, q)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev WatchEvent
		if err := dec.Decode(&ev); err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, io.EOF):
				return fmt.Errorf("the daemon at %s ended the watch of %s (did berth stop?)", c.socket, path)
			}
			return fmt.Errorf("read the watch of %s from %s: %w", path, c.socket, err)
		}
		if ev.Type == "" {
			// An answer without a type is a list: the daemon does
			// not know ?watch.
			return fmt.Errorf("the daemon at %s does not serve a watch of %s: it is older than this berth", c.socket, path)
		}
		if ev.Type == "ERROR" {
			var st metav1.Status
			_ = json.Unmarshal(ev.Object, &st)
			return fmt.Errorf("the daemon ended the watch of %s: %s", path, st.Message)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// Pods lists every pod the daemon knows, rejected manifests included.
func (c *Client) Pods(ctx context.Context) ([]v1.Pod, error) {
	var list v1.PodList
	if err := c.GetJSON(ctx, "/pods", &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// FindPod resolves what the operator typed to one pod of the daemon's, as
// ResolvePod does.
func (c *Client) FindPod(ctx context.Context, name, ns string) (*v1.Pod, error) {
	pods, err := c.Pods(ctx)
	if err != nil {
		return nil, err
	}
	return ResolvePod(pods, name, ns)
}

// ResolvePod resolves what the operator typed to one of pods: its full
// name (web-node1) or its manifest name (web), in namespace ns or, when ns
// is empty, in whichever namespace holds it. An exact name wins over a
// manifest name; more than one match is an error naming them.
func ResolvePod(pods []v1.Pod, name, ns string) (*v1.Pod, error) {
	// A rejected manifest's pod has no spec, so no node name of its own:
	// the node names of the others tell where its name's suffix starts.
	nodes := map[string]bool{}
	for i := range pods {
		if n := pods[i].Spec.NodeName; n != "" {
			nodes[n] = true
		}
	}
	manifestName := func(p *v1.Pod) bool {
		if p.Spec.NodeName != "" {
			return p.Name == name+"-"+p.Spec.NodeName
		}
		suffix, ok := strings.CutPrefix(p.Name, name+"-")
		return ok && (nodes[suffix] || len(nodes) == 0)
	}
	var exact, byManifest []*v1.Pod
	for i := range pods {
		p := &pods[i]
		if ns != "" && p.Namespace != ns {
			continue
		}
		switch {
		case p.Name == name:
			exact = append(exact, p)
		case manifestName(p):
			byManifest = append(byManifest, p)
		}
	}
	found := exact
	if len(found) == 0 {
		found = byManifest
	}
	// Two versions of one static pod (an old UID running while its edit
	// waits) are one name: the daemon picks the version it shows.
	seen := map[string]bool{}
	found = slices.DeleteFunc(found, func(p *v1.Pod) bool {
		key := p.Namespace + "/" + p.Name
		dup := seen[key]
		seen[key] = true
		return dup
	})
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		where := ""
		if ns != "" {
			where = " in namespace " + ns
		}
		return nil, fmt.Errorf("pod %q not found%s (berth pods lists them)", name, where)
	}
	var names []string
	for _, p := range found {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("pod %q is ambiguous: %s; pick one with -n NAMESPACE", name, strings.Join(names, ", "))
}
