// Package args reads the peers' command line (tests/peers PEER_CONTRACT): --key value pairs,
// some repeatable, the same convention as the Java estate peer's Args.java.
package args

import (
	"fmt"
	"os"
	"strings"

	"dubbo.apache.org/dubbo-go/v3/tls"
)

// Args holds the parsed --key value pairs.
type Args struct {
	single   map[string]string
	repeated map[string][]string
}

// Parse reads argv (without the program name); a malformed line exits with a message naming it.
func Parse(argv []string) *Args {
	a := &Args{single: map[string]string{}, repeated: map[string][]string{}}
	for i := 0; i < len(argv); i++ {
		key := argv[i]
		if !strings.HasPrefix(key, "--") || i+1 >= len(argv) {
			fmt.Fprintf(os.Stderr, "bad argument: %s\n", key)
			os.Exit(2)
		}
		i++
		a.single[key[2:]] = argv[i]
		a.repeated[key[2:]] = append(a.repeated[key[2:]], argv[i])
	}
	return a
}

// Get is the value of --key, or fallback.
func (a *Args) Get(key, fallback string) string {
	if v, ok := a.single[key]; ok {
		return v
	}
	return fallback
}

// Require is the value of --key; its absence exits naming the option.
func (a *Args) Require(key string) string {
	v, ok := a.single[key]
	if !ok {
		fmt.Fprintf(os.Stderr, "--%s is required\n", key)
		os.Exit(2)
	}
	return v
}

// All is every value given for --key.
func (a *Args) All(key string) []string {
	return a.repeated[key]
}

// TLS is the --tls-cert, --tls-key and --tls-ca options as dubbo-go's own TLS configuration
// (an instance's WithTLS: the root tls config, shared by its servers and clients), or nil when
// none is given. A provider serves TLS when it has a certificate and key, and requires client
// certificates signed by --tls-ca when that is given (mutual TLS); a consumer uses TLS when it
// has --tls-ca (the CA it trusts providers by) and presents --tls-cert/--tls-key when given.
func (a *Args) TLS() []tls.Option {
	var opts []tls.Option
	if ca := a.Get("tls-ca", ""); ca != "" {
		opts = append(opts, tls.WithCACertFile(ca))
	}
	if cert := a.Get("tls-cert", ""); cert != "" {
		opts = append(opts, tls.WithCertFile(cert), tls.WithKeyFile(a.Require("tls-key")))
	}
	if name := a.Get("tls-server-name", ""); name != "" {
		opts = append(opts, tls.WithServerName(name))
	}
	return opts
}
