// Command reqtrace counts the source files one request visits, from a
// Delve trace of a test binary: how many files the request's goroutine
// enters between the first call of a root function and its return, and how
// often it comes back to a file it had already left (a reader following
// the request turns back that many times).
//
//	go test -gcflags='all=-N -l' -c -o /tmp/api.test ./api
//	(cd api && dlv trace --exec /tmp/api.test '^github\.com/marketscreener/market/[a-z/]+\.' \
//	    -- -test.run '^TestOHLCVLimitAndOrder$' >/dev/null 2> /tmp/trace.txt)
//	go run ./e2e/cmd/reqtrace -bin /tmp/api.test -trace /tmp/trace.txt
//
// Functions are mapped to files through the binary's line table (built
// without inlining, so every traced function has an entry there).
package main

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

func main() {
	bin := flag.String("bin", "", "the traced test binary (built with -gcflags='all=-N -l')")
	trace := flag.String("trace", "", "dlv trace's output (its stderr)")
	root := flag.String("root", `api\.\(\*Server\)\.requestMiddleware\.func1$`, "regexp of the function a request starts in")
	module := flag.String("module", "github.com/marketscreener/market/", "import path prefix of the functions counted")
	flag.Parse()
	files, err := fileOf(*bin, *module)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reqtrace:", err)
		os.Exit(1)
	}
	f, err := os.Open(*trace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reqtrace:", err)
		os.Exit(1)
	}
	defer f.Close()
	seq, calls := requestFiles(bufio.NewScanner(f), regexp.MustCompile(*root), files)
	if calls == 0 {
		fmt.Fprintln(os.Stderr, "reqtrace: the root function was never called")
		os.Exit(1)
	}
	visits, reentries := count(seq)
	fmt.Printf("calls %d, in the module %d; files %d; re-entries %d\n", calls, len(seq), len(visits), reentries)
	names := make([]string, 0, len(visits))
	for n := range visits {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("  %-32s %d calls\n", n, visits[n])
	}
}

// fileOf maps every function of the module in the binary to its source
// file, relative to the module's root.
func fileOf(bin, module string) (map[string]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return nil, fmt.Errorf("%s: no Go line table", bin)
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, err
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, fn := range tab.Funcs {
		if !strings.HasPrefix(fn.Name, module) {
			continue
		}
		file, _, _ := tab.PCToLine(fn.Entry)
		if i := strings.Index(file, "/"+strings.SplitN(strings.TrimPrefix(fn.Name, module), ".", 2)[0]+"/"); i >= 0 && !strings.HasPrefix(file, "<") {
			file = file[i+1:]
		}
		out[fn.Name] = file
	}
	return out, nil
}

var (
	callLine   = regexp.MustCompile(`^> goroutine\((\d+)\): (.*?[^.])\(`)
	returnLine = regexp.MustCompile(`^>> goroutine\((\d+)\): (\S+) =>`)
)

// requestFiles reads a trace and returns the files of the module functions
// the first request's goroutine called, in order, and how many calls it
// made in all.
func requestFiles(sc *bufio.Scanner, root *regexp.Regexp, files map[string]string) (seq []string, calls int) {
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	g := ""
	for sc.Scan() {
		line := sc.Text()
		if m := callLine.FindStringSubmatch(line); m != nil {
			if g == "" && root.MatchString(m[2]) {
				g = m[1]
			}
			if g == "" || m[1] != g {
				continue
			}
			calls++
			if f, ok := files[m[2]]; ok && !strings.HasPrefix(f, "<") {
				seq = append(seq, f)
			}
		} else if m := returnLine.FindStringSubmatch(line); m != nil && g != "" && m[1] == g && root.MatchString(m[2]) {
			break
		}
	}
	return seq, calls
}

// count returns the calls per file and how many times the sequence enters
// a file it had left before.
func count(seq []string) (visits map[string]int, reentries int) {
	visits = map[string]int{}
	for i, f := range seq {
		if i > 0 && seq[i-1] != f && visits[f] > 0 {
			reentries++
		}
		visits[f]++
	}
	return visits, reentries
}
