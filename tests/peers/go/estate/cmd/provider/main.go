// A dubbo-go 3.3 provider of demo.Greeter over Triple with a ZooKeeper, etcd or Nacos registry, per the peers'
// contract: --registry zookeeper://host:port|etcd://host:port|
// nacos://host:port[?group=G] --application NAME --name LABEL [--port N]
// [--version V] [--group G] [--service V:G ...] [--register-mode interface|instance|all]
// [--chat true|false] (demo.Chat, served unless false) [--metadata-type local|remote]
// [--metadata-protocol dubbo|tri] (how application-level metadata is served)
// [--tls-cert PEM --tls-key PEM [--tls-ca PEM]] (TLS; mutual with --tls-ca)
// [--param k=v ...] (parameters of each demo.Greeter URL it registers, which routers read)
// [--weight N] (the registered weight; dubbo-go 3.3.2 registers weight=0 unless told).
// stdout carries only the "READY 127.0.0.1:port" line; it serves until stdin closes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	_ "dubbo.apache.org/dubbo-go/v3/imports"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/registry"
	"dubbo.apache.org/dubbo-go/v3/server"

	"estate/demo"
	"estate/internal/args"
)

// GreeterImpl answers like the Java estate peer (dubbo-go serves only exported types).
type GreeterImpl struct {
	label   string
	address string
}

func (g *GreeterImpl) SayHello(ctx context.Context, req *demo.HelloRequest) (*demo.HelloReply, error) {
	name := req.GetName()
	message := g.label + ": hello " + name
	switch {
	case name == "fail":
		return nil, fmt.Errorf("%s refused fail", g.label)
	case strings.HasPrefix(name, "sleep:"):
		ms, _ := strconv.Atoi(name[6:])
		time.Sleep(time.Duration(ms) * time.Millisecond)
	case name == "attachments":
		message = attachmentsJSON(ctx)
	case strings.HasPrefix(name, "big:"):
		n, _ := strconv.Atoi(name[4:])
		message = strings.Repeat("x", n)
	}
	return &demo.HelloReply{Message: message, Provider: g.address, Shard: -1}, nil
}

func (g *GreeterImpl) SayHelloStream(ctx context.Context, req *demo.HelloRequest, stream demo.Greeter_SayHelloStreamServer) error {
	if req.GetName() == "fail" {
		return fmt.Errorf("%s refused fail", g.label)
	}
	for i := 0; i < int(req.GetCount()); i++ {
		reply := &demo.HelloReply{Message: fmt.Sprintf("%s: hello %s #%d", g.label, req.GetName(), i), Provider: g.address}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
	return nil
}

// ChatImpl answers demo.Chat like the Java estate peer: Collect joins the lines it got with
// commas, Echo sends each line back as it arrives; both name the provider's address.
type ChatImpl struct {
	address string
}

func (c *ChatImpl) Collect(ctx context.Context, lines demo.Chat_CollectServer) (*demo.Summary, error) {
	texts := []string{}
	for lines.Recv() {
		texts = append(texts, lines.Msg().GetText())
	}
	if err := lines.Err(); err != nil {
		return nil, err
	}
	return &demo.Summary{Count: int32(len(texts)), Joined: strings.Join(texts, ","), Provider: c.address}, nil
}

func (c *ChatImpl) Echo(ctx context.Context, lines demo.Chat_EchoServer) error {
	for {
		line, err := lines.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := lines.Send(&demo.Line{Text: line.GetText(), Provider: c.address}); err != nil {
			return err
		}
	}
}

// attachmentsJSON is what the caller attached, as dubbo-go hands it to the service: a JSON
// object, keys sorted, each value joined when the transport gave several.
func attachmentsJSON(ctx context.Context) string {
	seen := map[string]string{}
	if raw, ok := ctx.Value(constant.AttachmentKey).(map[string]interface{}); ok {
		for k, v := range raw {
			switch value := v.(type) {
			case []string:
				seen[k] = strings.Join(value, ",")
			default:
				seen[k] = fmt.Sprint(value)
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ordered := make([]string, 0, len(keys))
	for _, k := range keys {
		key, _ := json.Marshal(k)
		value, _ := json.Marshal(seen[k])
		ordered = append(ordered, string(key)+":"+string(value))
	}
	return "{" + strings.Join(ordered, ",") + "}"
}

// freePort is a port on loopback that nothing listened on a moment ago.
func freePort() int {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "no free port:", err)
		os.Exit(1)
	}
	defer probe.Close()
	return probe.Addr().(*net.TCPAddr).Port
}

func registerMode(mode string) registry.Option {
	switch mode {
	case "interface":
		return registry.WithRegisterInterface()
	case "instance":
		return registry.WithRegisterService()
	case "all", "":
		return registry.WithRegisterServiceAndInterface()
	}
	fmt.Fprintf(os.Stderr, "--register-mode %q: expected interface, instance or all\n", mode)
	os.Exit(2)
	return nil
}

func main() {
	out := os.Stdout
	// dubbo-go logs to stdout by default: stdout is kept for the READY line only.
	os.Stdout = os.Stderr
	a := args.Parse(os.Args[1:])
	name := a.Require("name")
	port, _ := strconv.Atoi(a.Get("port", "0"))
	if port == 0 {
		port = freePort()
	}
	address := fmt.Sprintf("127.0.0.1:%d", port)
	// The MetadataService's own port, chosen here so that READY waits for it too: an instance
	// is registered before its MetadataService listens, and a consumer reading it at once
	// would be refused and retry later.
	metadataPort := freePort()
	// dubbo-go registers the host's first non-loopback address (common.GetLocalIp); the
	// environment variable it reads first keeps the registered address on loopback.
	os.Setenv(constant.DubboIpToRegistryKey, "127.0.0.1")

	instanceOpts := []dubbo.InstanceOption{dubbo.WithName(a.Require("application"))}
	// Application-level metadata: dubbo-go 3.3.2 keeps it in the process (type local) and serves
	// it with MetadataService 1.0.0 over the dubbo protocol unless told otherwise.
	switch a.Get("metadata-type", "local") {
	case "local":
	case "remote":
		instanceOpts = append(instanceOpts, dubbo.WithRemoteMetadata())
	default:
		fmt.Fprintln(os.Stderr, "--metadata-type: expected local or remote")
		os.Exit(2)
	}
	instanceOpts = append(instanceOpts, dubbo.WithMetadataServicePort(metadataPort))
	// --tls-cert/--tls-key [--tls-ca]: dubbo-go's TLS config (mutual TLS with --tls-ca).
	if opts := a.TLS(); len(opts) > 0 {
		instanceOpts = append(instanceOpts, dubbo.WithTLS(opts...))
	}
	if p := a.Get("metadata-protocol", ""); p != "" {
		instanceOpts = append(instanceOpts, dubbo.WithMetadataServiceProtocol(p))
	}
	ins, err := dubbo.NewInstance(append(instanceOpts,
		dubbo.WithRegistry(append(a.Registry(), registerMode(a.Get("register-mode", "all")))...),
		dubbo.WithProtocol(
			protocol.WithTriple(),
			protocol.WithIp("127.0.0.1"),
			protocol.WithPort(port),
		),
	)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbo.NewInstance:", err)
		os.Exit(1)
	}
	srv, err := ins.NewServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewServer:", err)
		os.Exit(1)
	}
	services := a.All("service")
	labelled := len(services) > 0
	if !labelled {
		services = []string{a.Get("version", "") + ":" + a.Get("group", "")}
	}
	for _, vg := range services {
		version, group, _ := strings.Cut(vg, ":")
		label := name
		if labelled {
			label = fmt.Sprintf("%s [%s:%s]", name, version, group)
		}
		var opts []server.ServiceOption
		if version != "" {
			opts = append(opts, server.WithVersion(version))
		}
		if group != "" {
			opts = append(opts, server.WithGroup(group))
		}
		// dubbo-go 3.3.2 writes the provider config's weight into the URL after the user's
		// params, and that weight is 0 unless set: no server option sets it, so this one does.
		if w := a.Get("weight", ""); w != "" {
			weight, err := strconv.ParseInt(w, 10, 64)
			if err != nil {
				fmt.Fprintf(os.Stderr, "--weight %q: expected an integer\n", w)
				os.Exit(2)
			}
			opts = append(opts, func(o *server.ServiceOptions) {
				if o.Provider != nil {
					o.Provider.Weight = weight
				}
			})
		}
		for _, kv := range a.All("param") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				fmt.Fprintf(os.Stderr, "--param %q: expected k=v\n", kv)
				os.Exit(2)
			}
			opts = append(opts, server.WithParam(k, v))
		}
		if err := demo.RegisterGreeterHandler(srv, &GreeterImpl{label: label, address: address}, opts...); err != nil {
			fmt.Fprintln(os.Stderr, "RegisterGreeterHandler:", err)
			os.Exit(1)
		}
	}
	// demo.Chat without version or group, as the Java estate peer serves it; --chat false leaves
	// it out (a second provider in one test need not serve it twice).
	if a.Get("chat", "true") == "true" {
		if err := demo.RegisterChatHandler(srv, &ChatImpl{address: address}); err != nil {
			fmt.Fprintln(os.Stderr, "RegisterChatHandler:", err)
			os.Exit(1)
		}
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	// Serve blocks; exporting and registering are done when the port accepts.
	deadline := time.Now().Add(20 * time.Second)
	waiting := []string{address}
	// Only a local-metadata instance serves a MetadataService.
	if a.Get("register-mode", "all") != "interface" && a.Get("metadata-type", "local") == "local" {
		waiting = append(waiting, fmt.Sprintf("127.0.0.1:%d", metadataPort))
	}
	for len(waiting) > 0 {
		select {
		case err := <-serveErr:
			fmt.Fprintln(os.Stderr, "Serve:", err)
			os.Exit(1)
		default:
		}
		conn, err := net.DialTimeout("tcp", waiting[0], 200*time.Millisecond)
		if err == nil {
			conn.Close()
			waiting = waiting[1:]
			continue
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "provider did not listen on", waiting[0])
			os.Exit(1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintln(out, "READY "+address)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
