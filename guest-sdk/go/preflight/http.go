package preflight

import (
	"encoding/json"
	"fmt"
	"strings"

	handler "github.com/preflight-wasm/preflight/guest-sdk/go/bindings/wasi_http_outgoing_handler"
	http "github.com/preflight-wasm/preflight/guest-sdk/go/bindings/wasi_http_types"
	"github.com/preflight-wasm/preflight/guest-sdk/go/bindings/wasi_io_streams"
	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// MaxRedirects is how many redirects HTTPGet follows; each one is a new request the host checks against the
// allow-list.
const MaxRedirects = 5

// Response is an HTTP response read whole (the host caps its size).
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Headers are the response's header fields, names in lower case as the host gives them.
	Headers [][2]string
	// Body is the whole body.
	Body []byte
}

// Header is the first value of the header name (case-insensitive), and whether there is one.
func (response *Response) Header(name string) (string, bool) {
	for _, field := range response.Headers {
		if strings.EqualFold(field[0], name) {
			return field[1], true
		}
	}
	return "", false
}

// JSON decodes the body into into with encoding/json.
func (response *Response) JSON(into any) error {
	if err := json.Unmarshal(response.Body, into); err != nil {
		return &HTTPError{Message: fmt.Sprintf("the response is not the JSON expected: %v", err)}
	}
	return nil
}

// HTTPError is a request that failed or that the host refused; the message names the wasi:http error code
// (HttpRequestDenied: not in the check's allow-list; DestinationIpProhibited: a private address), as the
// other SDKs say it.
type HTTPError struct {
	Message string
}

func (failure *HTTPError) Error() string { return failure.Message }

// HTTPGet sends GET url through the host and reads the whole response, following up to MaxRedirects
// redirects. The host sends it only when the check's ConfigMap allows the destination (its `http` key),
// enforces a per-request timeout, a response-size cap and a requests-per-evaluation cap, may add credentials
// the check never sees, and answers from its cache while a response's Cache-Control: max-age holds.
func HTTPGet(url string) (*Response, error) {
	return HTTPGetWithHeaders(url, nil)
}

// HTTPGetWithHeaders is HTTPGet with request headers (Accept, say), as name-value pairs. Headers the host
// sets are refused with an error: Host (built from the checked destination) and the credentials its grant
// injects.
func HTTPGetWithHeaders(url string, headers [][2]string) (*Response, error) {
	for redirect := 0; redirect <= MaxRedirects; redirect++ {
		response, err := sendGet(url, headers)
		if err != nil {
			return nil, err
		}
		location, moved := response.Header("location")
		switch response.Status {
		case 301, 302, 303, 307, 308:
		default:
			moved = false
		}
		if !moved {
			return response, nil
		}
		if url, err = resolve(url, location); err != nil {
			return nil, err
		}
	}
	return nil, &HTTPError{Message: fmt.Sprintf("more than %d redirects from %s", MaxRedirects, url)}
}

// splitURL is the scheme, authority and path with query of an absolute http(s) URL.
func splitURL(url string) (scheme, authority, path string, err error) {
	scheme, rest, found := strings.Cut(url, "://")
	if !found {
		return "", "", "", &HTTPError{Message: fmt.Sprintf("%q is not an absolute URL", url)}
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", "", &HTTPError{Message: fmt.Sprintf("%q: the scheme must be http or https", url)}
	}
	cut := strings.IndexAny(rest, "/?")
	if cut < 0 {
		cut = len(rest)
	}
	authority, path = rest[:cut], rest[cut:]
	if authority == "" {
		return "", "", "", &HTTPError{Message: fmt.Sprintf("%q has no host", url)}
	}
	if path == "" {
		path = "/"
	}
	return scheme, authority, path, nil
}

// resolve is location (absolute, or an absolute path) relative to base.
func resolve(base, location string) (string, error) {
	if strings.Contains(location, "://") {
		return location, nil
	}
	if !strings.HasPrefix(location, "/") {
		return "", &HTTPError{Message: fmt.Sprintf(
			"unsupported redirect location %q (relative paths are not followed)", location)}
	}
	scheme, authority, _, err := splitURL(base)
	if err != nil {
		return "", err
	}
	return scheme + "://" + authority + location, nil
}

func sendGet(url string, headers [][2]string) (*Response, error) {
	scheme, authority, path, err := splitURL(url)
	if err != nil {
		return nil, err
	}
	failed := func(what string) error { return &HTTPError{Message: fmt.Sprintf("GET %s: %s", url, what)} }
	fields := http.MakeFields()
	for _, header := range headers {
		if fields.Append(header[0], []byte(header[1])).IsErr() {
			return nil, failed("header " + header[0] + " is refused")
		}
	}
	request := http.MakeOutgoingRequest(fields)
	wireScheme := http.MakeSchemeHttp()
	if scheme == "https" {
		wireScheme = http.MakeSchemeHttps()
	}
	if request.SetMethod(http.MakeMethodGet()).IsErr() ||
		request.SetScheme(witTypes.Some(wireScheme)).IsErr() ||
		request.SetAuthority(witTypes.Some(authority)).IsErr() ||
		request.SetPathWithQuery(witTypes.Some(path)).IsErr() {
		return nil, failed("invalid URL")
	}
	sent := handler.Handle(request, witTypes.None[*http.RequestOptions]())
	if sent.IsErr() {
		return nil, failed(errorCodeName(sent.Err()))
	}
	pending := sent.Ok()
	defer pending.Drop()
	ready := pending.Subscribe()
	ready.Block()
	ready.Drop()
	answer := pending.Get()
	if answer.IsNone() || answer.Some().IsErr() {
		return nil, failed("no response")
	}
	if answer.Some().Ok().IsErr() {
		return nil, failed(errorCodeName(answer.Some().Ok().Err()))
	}
	response := answer.Some().Ok().Ok()
	defer response.Drop()
	read := &Response{Status: int(response.Status())}
	responseHeaders := response.Headers()
	for _, entry := range responseHeaders.Entries() {
		read.Headers = append(read.Headers, [2]string{entry.F0, string(entry.F1)})
	}
	responseHeaders.Drop()
	consumed := response.Consume()
	if consumed.IsErr() {
		return nil, failed("the body cannot be read")
	}
	body := consumed.Ok()
	opened := body.Stream()
	if opened.IsErr() {
		return nil, failed("the body cannot be read")
	}
	stream := opened.Ok()
	for {
		chunk := stream.BlockingRead(64 << 10)
		if chunk.IsErr() {
			if chunk.Err().Tag() == wasi_io_streams.StreamErrorClosed {
				break
			}
			stream.Drop()
			return nil, failed("reading the body failed")
		}
		read.Body = append(read.Body, chunk.Ok()...)
	}
	stream.Drop()
	http.IncomingBodyFinish(body).Drop()
	return read, nil
}

// errorCodeNames are the wasi:http error codes by tag, named as the Rust, Python and JavaScript SDKs name
// them.
var errorCodeNames = [...]string{
	"DnsTimeout", "DnsError", "DestinationNotFound", "DestinationUnavailable", "DestinationIpProhibited",
	"DestinationIpUnroutable", "ConnectionRefused", "ConnectionTerminated", "ConnectionTimeout",
	"ConnectionReadTimeout", "ConnectionWriteTimeout", "ConnectionLimitReached", "TlsProtocolError",
	"TlsCertificateError", "TlsAlertReceived", "HttpRequestDenied", "HttpRequestLengthRequired",
	"HttpRequestBodySize", "HttpRequestMethodInvalid", "HttpRequestUriInvalid", "HttpRequestUriTooLong",
	"HttpRequestHeaderSectionSize", "HttpRequestHeaderSize", "HttpRequestTrailerSectionSize",
	"HttpRequestTrailerSize", "HttpResponseIncomplete", "HttpResponseHeaderSectionSize",
	"HttpResponseHeaderSize", "HttpResponseBodySize", "HttpResponseTrailerSectionSize",
	"HttpResponseTrailerSize", "HttpResponseTransferCoding", "HttpResponseContentCoding",
	"HttpResponseTimeout", "HttpUpgradeFailed", "HttpProtocolError", "LoopDetected", "ConfigurationError",
	"InternalError",
}

func errorCodeName(code http.ErrorCode) string {
	if int(code.Tag()) < len(errorCodeNames) {
		return errorCodeNames[code.Tag()]
	}
	return fmt.Sprintf("error code %d", code.Tag())
}
