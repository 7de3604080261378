package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process of a test's own (no persistence, a
// free port), for faults the shared test Redis cannot suffer: Pause
// freezes it (SIGSTOP: connections stay open, nothing answers), Resume
// thaws it, Kill SIGKILLs it and Start runs it again on the same port.
// Stopped when the test ends.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	Port int
	cmd  *exec.Cmd
}

// StartServer runs a redis-server (Debian's redis-server package, as CI
// installs) and waits until it answers.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redis-server is needed (Debian's redis-server package): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), Port: port}
	s.Start()
	tb.Cleanup(func() {
		s.Resume()
		s.Kill()
	})
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(s.Port) + "/0" }

// Start runs the server (again) and waits until it answers.
func (s *Server) Start() {
	s.tb.Helper()
	log, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer log.Close()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(s.Port), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(15 * time.Second); c.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.tb.Fatalf("redis-server on port %d does not answer:\n%s", s.Port, b)
		}
	}
}

// Pause freezes the server (SIGSTOP).
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume thaws a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Kill SIGKILLs the server and waits for it to exit.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *Server) signal(sig syscall.Signal) {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
