package agentnet

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSConfig says how to reach a hub that serves TLS (python -m hubsvc
// --tls-cert/--tls-key) or mutual TLS (also --tls-client-ca).
type TLSConfig struct {
	// CAFile is a PEM bundle of the CA(s) that signed the hub's certificate
	// ("" = the system's roots).
	CAFile string
	// CertFile and KeyFile are this client's PEM certificate chain and private
	// key, for a hub that requires client certificates (mTLS). Set both or
	// neither. Under --tls-bind-identity the certificate must name the agent
	// (URI SAN agentnet:agent:<name>, else subject CN).
	CertFile string
	KeyFile  string
	// ServerName is the name to verify the hub's certificate against ("" = the
	// host of the target), e.g. "hub.internal" when dialing an IP address the
	// certificate does not list.
	ServerName string
}

// WithTLS makes Register, RegisterHuman and Dial connect over TLS as cfg says
// instead of plain text. Unreadable or malformed files make them fail with
// an INVALID_ARGUMENT *Error naming the file; a hub whose certificate does
// not verify (or that refuses the client's) fails the first call with
// UNAVAILABLE.
func WithTLS(cfg TLSConfig) Option {
	return func(o *clientOptions) { o.tls = &cfg }
}

// TransportCredentials builds the gRPC transport credentials of cfg (for
// callers that dial their own connection and pass it with WithConn).
func (cfg TLSConfig) TransportCredentials() (credentials.TransportCredentials, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.ServerName}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, invalidArgument("TLS CAFile: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalidArgument("TLS CAFile %s holds no PEM certificate", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, invalidArgument("TLS CertFile and KeyFile go together (mTLS): set both or neither")
	}
	if cfg.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, invalidArgument("TLS client certificate %s / key %s: %v", cfg.CertFile, cfg.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(tc), nil
}

// transportOption is the dial option of o's transport: TLS when WithTLS was
// given, else plain text.
func (o *clientOptions) transportOption() (grpc.DialOption, error) {
	if o.tls == nil {
		return grpc.WithTransportCredentials(insecureCredentials()), nil
	}
	creds, err := o.tls.TransportCredentials()
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(creds), nil
}
