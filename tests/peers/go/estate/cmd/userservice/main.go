// A dubbo-go 3.3 provider of the Java-interface service estate.UserService over dubbo-go's
// `dubbo` protocol with hessian2, registered in ZooKeeper at interface level, for generic
// ($invoke) calls: dubbo-go's provider filter `generic_service` (in its default filters) turns a
// $invoke into the method's call and its result into a map.
// Command line (the peers' contract): --registry zookeeper://host:port --application NAME
// --name LABEL [--port N] [--version V] [--group G].
// stdout carries only the "READY 127.0.0.1:port" line; it serves until stdin closes.
package main

import (
	"context"
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
	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"
	big "github.com/dubbogo/gost/math/big"

	"estate/internal/args"
)

// User is Java's estate.User to hessian (fields id and name, as the Java peer's bean has them).
type User struct {
	ID   int64  `hessian:"id" m:"id"` // m: the name dubbo-go's map generalizer writes
	Name string `hessian:"name" m:"name"`
}

// JavaClassName is the Java class hessian writes and reads this type as.
func (u *User) JavaClassName() string { return "estate.User" }

// UserService answers estate.UserService's methods; dubbo-go finds each by its Go name and by
// that name with its first letter's case swapped (getUser for GetUser).
type UserService struct {
	label string
}

// GetUser is the user of an id; an id below 1 fails as the Java peer's does: a Java
// IllegalArgumentException caused by an IllegalStateException (hessian's Java exception types,
// which dubbo-go writes as themselves rather than as a bare Throwable).
func (s *UserService) GetUser(_ context.Context, id int64) (*User, error) {
	if id < 1 {
		failure := java_exception.NewIllegalArgumentException(
			fmt.Sprintf("no user %d at %s", id, s.label))
		failure.Cause = java_exception.NewIllegalStateException("ids start at 1")
		return nil, failure
	}
	return &User{ID: id, Name: fmt.Sprintf("user-%d@%s", id, s.label)}, nil
}

// Save returns the user it was given with its name upper-cased (the Java peer's contract).
func (s *UserService) Save(_ context.Context, u *User) (*User, error) {
	return &User{ID: u.ID, Name: strings.ToUpper(u.Name)}, nil
}

// Describe names the Go types dubbo-go made of its arguments and sends them back, so a test
// sees both what arrived and what dubbo-go's map generalizer makes of each type on the way out.
func (s *UserService) Describe(
	_ context.Context, items []any, m map[any]any, when time.Time, amount *big.Decimal, data []byte,
) (map[string]any, error) {
	itemTypes := make([]string, len(items))
	for i, item := range items {
		itemTypes[i] = fmt.Sprintf("%T", item)
	}
	amountText, plusOne := "<nil>", &big.Decimal{}
	if amount != nil {
		amountText = amount.String()
		if err := big.DecimalAdd(amount, new(big.Decimal).FromInt(1), plusOne); err != nil {
			return nil, err
		}
	}
	// The map's keys as strings: what arrived, apart from what the map generalizer makes of a
	// map[any]any on the way out.
	mapKeys := make([]string, 0, len(m))
	byString := make(map[string]any, len(m))
	for key, value := range m {
		mapKeys = append(mapKeys, fmt.Sprint(key))
		byString[fmt.Sprint(key)] = value
	}
	sort.Strings(mapKeys)
	return map[string]any{
		"itemTypes":     itemTypes,
		"items":         items,
		"mapType":       fmt.Sprintf("%T", m),
		"map":           m,
		"mapKeys":       mapKeys,
		"mapByString":   byString,
		"whenMillis":    when.UnixMilli(),
		"when":          when,
		"amount":        amountText,
		"amountPlusOne": plusOne,
		"dataLen":       len(data),
		"data":          data,
	}, nil
}

// Sum adds Java's int[] (hessian's typed int list, a []int32 in Go) into a long.
func (s *UserService) Sum(_ context.Context, numbers []int32) (int64, error) {
	var total int64
	for _, n := range numbers {
		total += int64(n)
	}
	return total, nil
}

// Nothing returns Java's null.
func (s *UserService) Nothing(_ context.Context) (*User, error) {
	return nil, nil
}

// Echo returns its string with the provider's label, so a caller sees which provider answered.
func (s *UserService) Echo(_ context.Context, text string) (string, error) {
	return s.label + ": " + text, nil
}

// Fail always fails, with a message naming its argument.
func (s *UserService) Fail(_ context.Context, text string) (string, error) {
	return "", fmt.Errorf("%s refused %s", s.label, text)
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

func main() {
	out := os.Stdout
	// dubbo-go logs to stdout by default: stdout is kept for the READY line only.
	os.Stdout = os.Stderr
	a := args.Parse(os.Args[1:])
	name := a.Require("name")
	if !strings.HasPrefix(a.Require("registry"), "zookeeper://") {
		fmt.Fprintln(os.Stderr, "--registry: expected zookeeper://host:port")
		os.Exit(2)
	}
	port, _ := strconv.Atoi(a.Get("port", "0"))
	if port == 0 {
		port = freePort()
	}
	address := fmt.Sprintf("127.0.0.1:%d", port)
	// dubbo-go registers the host's first non-loopback address unless told otherwise.
	os.Setenv(constant.DubboIpToRegistryKey, "127.0.0.1")
	hessian.RegisterPOJO(&User{})

	ins, err := dubbo.NewInstance(
		dubbo.WithName(a.Require("application")),
		// dubbo-go exports its MetadataService over dubbo on the service's own port unless told
		// otherwise, and the second listen on that port panics ("address already in use").
		dubbo.WithMetadataServicePort(freePort()),
		dubbo.WithRegistry(append(a.Registry(), registry.WithRegisterInterface())...),
		dubbo.WithProtocol(
			protocol.WithDubbo(),
			protocol.WithIp("127.0.0.1"),
			protocol.WithPort(port),
		),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbo.NewInstance:", err)
		os.Exit(1)
	}
	srv, err := ins.NewServer(server.WithServerSerialization(constant.Hessian2Serialization))
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewServer:", err)
		os.Exit(1)
	}
	opts := []server.ServiceOption{server.WithInterface("estate.UserService")}
	if v := a.Get("version", ""); v != "" {
		opts = append(opts, server.WithVersion(v))
	}
	if g := a.Get("group", ""); g != "" {
		opts = append(opts, server.WithGroup(g))
	}
	if err := srv.RegisterService(&UserService{label: name}, opts...); err != nil {
		fmt.Fprintln(os.Stderr, "RegisterService:", err)
		os.Exit(1)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	// Serve blocks; exporting and registering are done when the port accepts.
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-serveErr:
			fmt.Fprintln(os.Stderr, "Serve:", err)
			os.Exit(1)
		default:
		}
		conn, err := net.DialTimeout("tcp", address, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "provider did not listen on", address)
			os.Exit(1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintln(out, "READY "+address)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
