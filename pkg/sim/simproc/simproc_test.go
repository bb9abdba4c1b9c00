package simproc

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/sim"
)

func TestStartNServesAndStops(t *testing.T) {
	procs := StartN(t, 2, Options{Config: sim.Config{GPU: "A10G", Model: "llama-3.1-8b", MaxLoras: 1},
		Speedup: 20, LoRAModules: []string{"sql=/adapters/sql"}, Engine: "sglang"})
	if procs[0].Port == procs[1].Port || procs[0].Port == 0 {
		t.Fatalf("ports %d and %d", procs[0].Port, procs[1].Port)
	}
	resp, err := http.Post(procs[1].URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"sql","prompt":"select","max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"completion_tokens":3`) {
		t.Fatalf("completion: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(procs[1].URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "sglang:num_running_reqs") {
		t.Fatalf("--engine sglang not passed through: %s", body)
	}
	procs[0].Stop()
	procs[0].Stop()
	if _, err := http.Get(procs[0].URL + "/health"); err == nil {
		t.Fatal("stopped simulator still answers")
	}
}

func TestStartOnAnotherLoopbackAddressAndPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // a port free on loopback
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := Start(t, Options{Host: "127.0.0.77", Port: port, Speedup: 20})
	if want := "127.0.0.77:" + strconv.Itoa(port); p.Addr != want || p.Port != port {
		t.Fatalf("listening on %s (port %d), want %s", p.Addr, p.Port, want)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		c.Close()
		t.Fatal("the simulator also answers on 127.0.0.1")
	}
}
