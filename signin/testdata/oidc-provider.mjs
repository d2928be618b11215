// An OAuth 2.1 authorization server nobody in this project wrote, for
// signin's TestSignInAgainstOIDCProvider: panva's oidc-provider (npm,
// pinned in scripts/npm/package.json), configured as an MCP server's
// authorization server would be:
//
//   - dynamic client registration (RFC 7591), open (no initial token);
//   - client ID metadata documents (its experimental draft-02 feature):
//     a client id that is an https URL is fetched (over loopback here:
//     its fetch's guard against special-use addresses is lifted, and the
//     test's certificate is trusted through NODE_EXTRA_CA_CERTS);
//   - PKCE required for every client (S256 is the only method it has);
//   - resource indicators (RFC 8707): an access token is issued only for
//     the protected MCP resource $RESOURCE, opaque, and bound to it (aud);
//   - refresh tokens (offline_access, its defaults: issued with consent,
//     rotated for public clients), revocation (RFC 7009), introspection
//     (RFC 7662) for the resource server's own confidential client;
//   - devInteractions: its built-in login and consent forms (any login).
//
// Environment: OIDC_PROVIDER_DIR (the package's directory), RESOURCE (the
// MCP endpoint), RS_CLIENT_SECRET (the resource server's introspection
// secret), ACCESS_TOKEN_TTL (seconds). Listens on a free port of
// 127.0.0.1 and prints one JSON line, {"issuer": "..."}, when ready.
import { createServer } from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const need = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`oidc-provider.mjs: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const dir = need('OIDC_PROVIDER_DIR');
const resource = need('RESOURCE');
const rsSecret = need('RS_CLIENT_SECRET');
const ttl = Number(process.env.ACCESS_TOKEN_TTL || '600');

const { default: Provider, errors } = await import(pathToFileURL(path.join(dir, 'lib', 'index.js')).href);

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    // The protected MCP server introspects tokens as this client.
    client_id: 'mcp-resource',
    client_secret: rsSecret,
    redirect_uris: [],
    response_types: [],
    grant_types: [],
  }],
  // Any login signs in as the account of that name.
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  scopes: ['openid', 'offline_access'],
  pkce: { required: () => true },
  ttl: { AccessToken: ttl },
  cookies: { keys: ['marlowe-test-cookie-key-0123456789'] },
  // Its default fetch refuses loopback addresses (SSRF guard): the test's
  // client metadata documents are served on 127.0.0.1.
  fetch: (url, options) => {
    const { dispatcher: _guard, ...rest } = options;
    return globalThis.fetch(url, rest);
  },
  features: {
    clientIdMetadataDocument: { enabled: true, ack: 'draft-02' },
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: async (_ctx, indicator) => {
        if (indicator !== resource) {
          throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        }
        return { scope: 'mcp:tools', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
      },
    },
  },
});
// Refused requests are reported on stderr (the Go test shows it).
provider.on('server_error', (_ctx, err) => console.error('server_error', err));
provider.on('grant.error', (_ctx, err) => console.error('grant.error', err.message, err.error_description || ''));
provider.on('authorization.error', (_ctx, err) => console.error('authorization.error', err.message, err.error_description || ''));
provider.on('registration_create.error', (_ctx, err) => console.error('registration.error', err.message, err.error_description || ''));
provider.on('revocation.error', (_ctx, err) => console.error('revocation.error', err.message, err.error_description || ''));
provider.on('introspection.error', (_ctx, err) => console.error('introspection.error', err.message, err.error_description || ''));

server.on('request', provider.callback());
process.stdout.write(JSON.stringify({ issuer }) + '\n');
// Ends with its parent: the Go test closes stdin.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
