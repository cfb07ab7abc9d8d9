// A real OpenID provider on loopback for the OAuth tests (tests/suite/oauth.rs): the npm package
// `oidc-provider` (OpenID certified), issuing JWT access tokens with resource indicators (RFC
// 8707) to client_credentials clients. It starts two issuers on 127.0.0.1 — the one hands trusts
// and another — fetches real tokens from its own token endpoint, mints the attack tokens with the
// trusted issuer's real keys (each differs from a valid token in one way), prints one JSON line
// and serves until stdin closes.
//
// Usage: node provider.mjs AUDIENCE

import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';
import * as jose from 'jose';

const audience = process.argv[2];
const CLIENT_ID = 'hands-agent';
const SECOND_ID = 'hands-agent-2';
const CLIENT_SECRET = 'hands-agent-secret-0123456789';

async function keys(prefix) {
  const out = [];
  for (const [alg, kid, opts] of [['ES256', 'es-1', {}], ['RS256', 'rs-1', { modulusLength: 2048 }], ['EdDSA', 'ed-1', { crv: 'Ed25519' }]]) {
    const { privateKey } = await jose.generateKeyPair(alg, { extractable: true, ...opts });
    const jwk = await jose.exportJWK(privateKey);
    out.push({ ...jwk, kid: `${prefix}${kid}`, use: 'sig', alg: alg === 'EdDSA' ? undefined : alg });
  }
  return out.map((k) => JSON.parse(JSON.stringify(k)));
}

async function start(signing) {
  const server = http.createServer();
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [CLIENT_ID, SECOND_ID].map((client_id) => ({
      client_id,
      client_secret: CLIENT_SECRET,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: 'hands other',
    })),
    jwks: { keys: signing },
    scopes: ['hands', 'other'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => audience,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({
          scope: 'hands other',
          audience: resource,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
  });
  server.on('request', provider.callback());
  return { issuer, server };
}

async function token(issuer, resource, scope, client = CLIENT_ID) {
  const body = new URLSearchParams({ grant_type: 'client_credentials', resource, scope });
  const basic = Buffer.from(`${client}:${CLIENT_SECRET}`).toString('base64');
  const r = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body,
  });
  const j = await r.json();
  if (!j.access_token) throw new Error(`no token from ${issuer}: ${JSON.stringify(j)}`);
  return j.access_token;
}

const b64 = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

async function mint(jwk, header, claims) {
  const key = await jose.importJWK(jwk, header.alg);
  return new jose.SignJWT(claims).setProtectedHeader(header).sign(key);
}

const trusted = await keys('');
const main = await start(trusted);
const other = await start(await keys('other-'));
const valid = await token(main.issuer, audience, 'hands');
const claims = jose.decodeJwt(valid);
const now = Math.floor(Date.now() / 1000);
const [es, rs, ed] = trusted;
const [head, payload, sig] = valid.split('.');
const publicPem = crypto.createPublicKey({ key: { kty: es.kty, crv: es.crv, x: es.x, y: es.y }, format: 'jwk' })
  .export({ type: 'spki', format: 'pem' });
const hmac = crypto.createHmac('sha256', publicPem).update(`${b64({ alg: 'HS256', typ: 'at+jwt', kid: 'es-1' })}.${payload}`).digest('base64url');

// A header with a `crit` extension, signed with the real ES256 key by hand (jose refuses to
// sign an extension it does not know).
// Its control, `hand_signed`, is signed the same way without `crit`.
const byHand = (header) => {
  const input = `${b64(header)}.${payload}`;
  const sig = crypto.sign('sha256', Buffer.from(input), {
    key: crypto.createPrivateKey({ key: es, format: 'jwk' }),
    dsaEncoding: 'ieee-p1363',
  }).toString('base64url');
  return `${input}.${sig}`;
};

const tokens = {
  crit: byHand({ alg: 'ES256', typ: 'at+jwt', kid: 'es-1', crit: ['x-hands'], 'x-hands': 1 }),
  hand_signed: byHand({ alg: 'ES256', typ: 'at+jwt', kid: 'es-1' }),
  valid,
  second_client: await token(main.issuer, audience, 'hands', SECOND_ID),
  other_audience: await token(main.issuer, 'http://127.0.0.1:9/elsewhere', 'hands'),
  no_scope: await token(main.issuer, audience, 'other'),
  other_issuer: await token(other.issuer, audience, 'hands'),
  minted_es256: await mint(es, { alg: 'ES256', typ: 'at+jwt', kid: 'es-1' }, claims),
  minted_rs256: await mint(rs, { alg: 'RS256', typ: 'at+jwt', kid: 'rs-1' }, claims),
  minted_eddsa: await mint(ed, { alg: 'EdDSA', typ: 'at+jwt', kid: 'ed-1' }, claims),
  expired: await mint(es, { alg: 'ES256', typ: 'at+jwt', kid: 'es-1' }, { ...claims, iat: now - 7200, exp: now - 3600 }),
  not_yet: await mint(es, { alg: 'ES256', typ: 'at+jwt', kid: 'es-1' }, { ...claims, nbf: now + 3600 }),
  forged_issuer: await mint(es, { alg: 'ES256', typ: 'at+jwt', kid: 'es-1' }, { ...claims, iss: other.issuer }),
  wrong_typ: await mint(es, { alg: 'ES256', typ: 'id+jwt', kid: 'es-1' }, claims),
  tampered: `${head}.${b64({ ...claims, sub: 'someone-else' })}.${sig}`,
  alg_none: `${b64({ alg: 'none', typ: 'at+jwt' })}.${payload}.`,
  hmac_public_key: `${b64({ alg: 'HS256', typ: 'at+jwt', kid: 'es-1' })}.${payload}.${hmac}`,
  alg_swap: `${b64({ alg: 'RS256', typ: 'at+jwt', kid: 'es-1' })}.${payload}.${sig}`,
};
console.log(JSON.stringify({ issuer: main.issuer, other_issuer: other.issuer, sub: claims.sub, client_id: CLIENT_ID, client_secret: CLIENT_SECRET, tokens }));
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
