package telegramfake

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"
)

// A held sendDocument whose client dies before sending the body's last
// bytes (the multipart form ends before the body does) still lets the
// fake close: the held call notices the fake closing, not only its
// request's context, which the server cancels only for a body read to its
// end. Before, Close waited on the held handler for ever.
func TestHeldCallEndsWhenItsClientDies(t *testing.T) {
	s := New(Config{})
	s.HoldResponses("sendDocument", 1)
	const epilogue = "trailing bytes never sent"
	body := "--B\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n-100500\r\n" +
		"--B\r\nContent-Disposition: form-data; name=\"document\"; filename=\"a.csv\"\r\nContent-Type: text/csv\r\n\r\nx,y\n1,2\n\r\n" +
		"--B--\r\n" + epilogue
	u, _ := url.Parse(s.URL())
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /bot%s/sendDocument HTTP/1.1\r\nHost: %s\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: %d\r\n\r\n%s",
		s.Config().Token, u.Host, len(body), body[:len(body)-len(epilogue)])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return len(s.Documents()) == 1 }); err != nil {
		t.Fatalf("the held upload never landed: %v", err)
	}
	_ = conn.Close()
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits on the held call 10 s after its client died")
	}
}
