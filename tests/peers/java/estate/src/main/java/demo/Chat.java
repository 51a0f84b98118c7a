package demo;

import demo.ChatOuterClass.Line;
import demo.ChatOuterClass.Summary;
import org.apache.dubbo.common.stream.StreamObserver;

/**
 * demo.Chat from protos/demo/chat.proto. Dubbo's reflective Triple has no client-streaming
 * method shape: Collect is declared as a request stream like Echo and answers exactly once,
 * which on the wire is what a gRPC client-streaming call sees.
 */
public interface Chat {
    StreamObserver<Line> Collect(StreamObserver<Summary> summary);

    StreamObserver<Line> Echo(StreamObserver<Line> lines);
}
