package demo;

import demo.GreeterOuterClass.HelloReply;
import demo.GreeterOuterClass.HelloRequest;
import org.apache.dubbo.common.stream.StreamObserver;

/**
 * demo.Greeter from protos/demo/greeter.proto as a plain Dubbo interface: its methods take and
 * return protobuf messages, so Triple carries them as gRPC does (application/grpc+proto).
 */
public interface Greeter {
    HelloReply SayHello(HelloRequest request);

    void SayHelloStream(HelloRequest request, StreamObserver<HelloReply> replies);
}
