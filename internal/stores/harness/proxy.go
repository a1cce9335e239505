package harness

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a database server until it is cut:
// Cut closes every open connection and makes new ones fail at once (they
// are accepted and closed), as when the network to the store goes away;
// Restore lets new connections through again. Stall keeps every connection
// open but forwards no more bytes, as a server that stops answering does;
// Resume ends the stall. Delay adds latency.
type Proxy struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	down   bool
	delay  time.Duration
	conns  map[net.Conn]struct{}
	// resume is non-nil during a stall, and closed by Resume.
	resume chan struct{}
}

// NewProxy listens on 127.0.0.1 and forwards to target (host:port).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(client net.Conn) {
	p.mu.Lock()
	down, delay := p.down, p.delay
	p.mu.Unlock()
	if down {
		client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		if delay > 0 {
			copyDelayed(dst, src, delay)
		} else {
			p.copyStallable(dst, src)
		}
		dst.Close()
		src.Close()
	}
	go pipe(server, client)
	go pipe(client, server)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// Cut closes every forwarded connection and refuses new ones; it ends a
// stall.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// Delay makes every byte forwarded from now on arrive d later in each
// direction (a round trip gains 2d), as a network between the application
// and the database would: set it before the connections are opened.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Stall stops forwarding bytes: connections stay open, and whatever is
// sent on them from now on is held, as by a server that stopped answering
// (not with Delay).
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

// Resume ends a stall. The connections that held bytes are closed without
// forwarding them, as the network would end them in time; the others, and
// new ones, forward again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// copyStallable copies src to dst until either fails, or drops a chunk
// read during a stall, with its connection, at Resume.
func (p *Proxy) copyStallable(dst io.Writer, src io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := src.Read(b)
		if n > 0 {
			p.mu.Lock()
			resume := p.resume
			p.mu.Unlock()
			if resume != nil {
				<-resume
				return
			}
			if _, werr := dst.Write(b[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Restore lets new connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// copyDelayed copies src to dst, writing each chunk d after it was read.
// Reading goes on meanwhile, so that the delay adds latency, not a
// bandwidth limit.
func copyDelayed(dst io.Writer, src io.Reader, d time.Duration) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 4<<10) // the database's messages here are small
			n, err := src.Read(b)
			if n > 0 {
				chunks <- chunk{b[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.b); err != nil {
			for range chunks { // let the reader finish
			}
			return
		}
	}
}
