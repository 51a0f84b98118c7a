"""What both sides speak on the wire: Triple headers, attachments, and reading generated gRPC
modules."""
