"""Who is asking: API keys and bearer JWTs mapped to principals, each with its widest scope.

The ``--principals`` file (TOML or JSON: ``[anonymous]``, ``[principals.NAME]``, ``[jwt]``) is described in
docs/server.md.  A passage without an ``acl`` is visible only to a scope whose ``acl`` is ``"*"``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from sleuth.config import settings
from sleuth.search.base import FilterError, Filters

from .settings import ServerConfigError

ALL_GROUPS = "*"
#: the kind of the principal a principals file's [anonymous] table gives callers without credentials
ANONYMOUS = "anonymous"
#: algorithms a configuration may allow (PyJWT's, without "none")
KNOWN_ALGORITHMS = frozenset(jwt.algorithms.get_default_algorithms()) - {"none"}
PRINCIPAL_KEYS = {"key_sha256", "acl", "filters", "sources"}
JWT_KEYS = {
    "algorithms",
    "secret_env",
    "secret_file",
    "jwks_file",
    "issuer",
    "audience",
    "scope_claim",
    "name_claim",
    "leeway_s",
}


class AuthError(Exception):
    """Credentials that do not identify a principal (answered with 401)."""


@dataclass(frozen=True)
class Principal:
    """An identity and the widest scope it may read.

    ``id`` is stable and never holds a secret (it owns traces); ``name`` is what logs show;
    ``scope`` is its widest :class:`Filters` (``Filters()`` reads everything); ``sources``
    the source names it may search (``None``: all)."""

    id: str
    name: str
    scope: Filters
    kind: str = "key"
    sources: frozenset[str] | None = None

    def may_use(self, source: str) -> bool:
        return self.sources is None or source in self.sources


#: a server without any key or principals file (loopback only): the caller states its own scope
OPEN = Principal(id="anonymous", name="anonymous", scope=Filters(), kind="open")


def key_principal(key: str) -> Principal:
    """A plain ``--api-key`` without a principals file: authenticated, scope unrestricted."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Principal(id=digest, name=f"key-{digest[:8]}", scope=Filters(), kind="key")


def scope_from(entry: Mapping[str, Any], where: str) -> tuple[Filters, frozenset[str] | None]:
    """A scope table (``acl``, ``filters``, ``sources``) -> (Filters, sources)."""
    if "acl" not in entry:
        raise ValueError(f"{where}: 'acl' is required (a list of groups, or \"*\" for every passage)")
    acl_raw = entry["acl"]
    if acl_raw == ALL_GROUPS:
        acl: frozenset[str] | None = None
    elif isinstance(acl_raw, str) and acl_raw.strip():
        acl = frozenset([acl_raw.strip()])
    elif isinstance(acl_raw, list) and all(isinstance(g, str) and g.strip() for g in acl_raw):
        acl = frozenset(g.strip() for g in acl_raw)
    else:
        raise ValueError(f"{where}: 'acl' must be a list of group names or \"*\"")
    raw = entry.get("filters")
    if raw is None:
        exprs: list[str] = []
    elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        exprs = list(raw)
    elif isinstance(raw, Mapping):
        exprs = [f"{k}=" + ",".join(map(str, v if isinstance(v, list) else [v])) for k, v in raw.items()]
    else:
        raise ValueError(f"{where}: 'filters' must be a list of expressions or a mapping")
    try:
        fixed = Filters.parse(exprs)
    except FilterError as e:
        raise ValueError(f"{where}: {e}") from None
    if fixed.acl is not None:
        raise ValueError(f"{where}: give ACL groups in 'acl', not in 'filters'")
    sources = entry.get("sources")
    if sources is not None and not (isinstance(sources, list) and all(isinstance(s, str) for s in sources)):
        raise ValueError(f"{where}: 'sources' must be a list of source names")
    return Filters(fixed.equals, fixed.ranges, acl), frozenset(sources) if sources is not None else None


# -- JWT ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class JwtConfig:
    algorithms: tuple[str, ...]
    issuer: str
    audience: str
    secret: bytes | None
    jwks: tuple[tuple[Mapping[str, Any], jwt.PyJWK], ...] = ()
    scope_claim: str = "sleuth_scope"
    name_claim: str = "sub"
    leeway_s: float = 0.0

    @classmethod
    def load(cls, t: Mapping[str, Any], base: Path) -> JwtConfig:
        unknown = set(t) - JWT_KEYS
        if unknown:
            raise ValueError(f"[jwt]: unknown setting(s) {sorted(unknown)}; known: {sorted(JWT_KEYS)}")
        algs = t.get("algorithms")
        if not isinstance(algs, list) or not algs or not all(isinstance(a, str) for a in algs):
            raise ValueError("[jwt]: 'algorithms' must list the accepted algorithms, e.g. [\"HS256\"]")
        bad = [a for a in algs if a not in KNOWN_ALGORITHMS]
        if bad:
            raise ValueError(f"[jwt]: algorithm(s) {bad} refused; choose from {sorted(KNOWN_ALGORITHMS)}")
        for need in ("issuer", "audience"):
            if not isinstance(t.get(need), str) or not t[need]:
                raise ValueError(f"[jwt]: '{need}' is required (tokens are checked against it)")
        secret = None
        if any(a.startswith("HS") for a in algs):
            if "secret_env" in t:
                value = settings.get(str(t["secret_env"])) or ""
                if not value:
                    raise ValueError(f"[jwt]: the environment variable {t['secret_env']} is empty")
                secret = value.encode()
            elif "secret_file" in t:
                secret = (base / str(t["secret_file"])).read_bytes().strip()
            else:
                raise ValueError("[jwt]: HS* algorithms need 'secret_env' or 'secret_file'")
            if len(secret) < 32:
                raise ValueError("[jwt]: the shared secret must be at least 32 bytes")
        jwks: tuple[tuple[Mapping[str, Any], jwt.PyJWK], ...] = ()
        if any(not a.startswith("HS") for a in algs):
            if "jwks_file" not in t:
                raise ValueError("[jwt]: public-key algorithms need 'jwks_file'")
            try:
                raw = json.loads((base / str(t["jwks_file"])).read_text("utf-8"))
                jwks = tuple((k, jwt.PyJWK(k)) for k in raw["keys"] if k.get("kty") != "oct")
            except (OSError, ValueError, KeyError, TypeError, AttributeError, jwt.PyJWKError) as e:
                raise ValueError(f"[jwt]: cannot read the JWKS file {t['jwks_file']}: {e}") from None
            if not jwks:
                raise ValueError(f"[jwt]: the JWKS file {t['jwks_file']} holds no public key")
        return cls(
            algorithms=tuple(algs),
            issuer=t["issuer"],
            audience=t["audience"],
            secret=secret,
            jwks=jwks,
            scope_claim=str(t.get("scope_claim", "sleuth_scope")),
            name_claim=str(t.get("name_claim", "sub")),
            leeway_s=float(t.get("leeway_s", 0)),
        )

    def _key(self, header: Mapping[str, Any]) -> Any:
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise AuthError(f"the token's algorithm {alg!r} is not accepted")
        if alg.startswith("HS"):
            return self.secret
        kid = header.get("kid")
        family = "EC" if alg.startswith("ES") else "OKP" if alg == "EdDSA" else "RSA"
        fits = [
            k
            for raw, k in self.jwks
            if k.key_type == family and raw.get("alg", alg) == alg and (kid is None or raw.get("kid") == kid)
        ]
        if len(fits) != 1:
            raise AuthError("no single key of the JWKS file fits the token's 'kid' and algorithm")
        return fits[0].key

    def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            key = self._key(header)
            claims = jwt.decode(
                token,
                key,
                algorithms=[header["alg"]],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud", self.name_claim]},
            )
        except jwt.ExpiredSignatureError:
            raise AuthError("the bearer token has expired") from None
        except jwt.InvalidSignatureError:
            raise AuthError("the bearer token's signature does not verify") from None
        except jwt.PyJWTError as e:
            raise AuthError(f"the bearer token is not valid: {e}") from None
        claim = claims.get(self.scope_claim)
        if isinstance(claim, list):
            claim = {"acl": claim}
        if not isinstance(claim, Mapping):
            raise AuthError(f"the bearer token carries no scope claim {self.scope_claim!r}")
        try:
            scope, sources = scope_from(claim, f"the token's {self.scope_claim!r} claim")
        except ValueError as e:
            raise AuthError(str(e)) from None
        who = str(claims[self.name_claim])
        return Principal(id=f"jwt:{self.issuer}:{who}", name=who, scope=scope, kind="jwt", sources=sources)


# -- the configuration -------------------------------------------------------------------
class Principals:
    """Resolves a bearer credential (or its absence) to a :class:`Principal`."""

    def __init__(
        self,
        by_key: Mapping[str, Principal] | None = None,
        *,
        anonymous: Principal | None = None,
        jwt_config: JwtConfig | None = None,
        plain_keys: tuple[str, ...] = (),
    ) -> None:
        self._by_hash = dict(by_key or {})
        self._plain = tuple((hashlib.sha256(k.encode()).hexdigest(), key_principal(k)) for k in plain_keys)
        self.anonymous = anonymous
        self.jwt = jwt_config

    def resolve(self, token: str | None) -> Principal:
        if self.anonymous is OPEN:
            return OPEN  # a server without keys (loopback only) ignores credentials, as it always did
        if not token:
            if self.anonymous is None:
                raise AuthError("a valid API key or token is required: send 'Authorization: Bearer <key>'")
            return self.anonymous
        if self.jwt is not None and _looks_like_jwt(token):
            return self.jwt.verify(token)
        digest = hashlib.sha256(token.encode()).hexdigest()
        found = None
        for h, p in [*self._by_hash.items(), *self._plain]:
            if hmac.compare_digest(h, digest):
                found = p
        if found is None:
            raise AuthError("the API key is not known to this server (no principal has it)")
        return found


def _looks_like_jwt(token: str) -> bool:
    if token.count(".") != 2:
        return False
    try:
        jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return False
    return True


def load_principals(path: str | Path) -> Principals:
    """Read a principals file (TOML, or JSON by its ``.json`` suffix); one sentence on any error."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as e:  # tomllib.TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ServerConfigError(f"cannot read the principals file {p}: {e}") from None
    try:
        return _build(data, p.parent)
    except (ValueError, OSError) as e:  # OSError: a secret or JWKS file it names cannot be read
        raise ServerConfigError(f"principals file {p}: {e}") from None


def _build(data: Any, base: Path) -> Principals:
    if not isinstance(data, Mapping):
        raise ValueError("the top level must be a table")
    unknown = set(data) - {"anonymous", "principals", "jwt"}
    if unknown:
        raise ValueError(f"unknown table(s) {sorted(unknown)}; known: anonymous, principals, jwt")
    anonymous = None
    if "anonymous" in data:
        scope, sources = scope_from(data["anonymous"], "[anonymous]")
        anonymous = Principal(id="anonymous", name="anonymous", scope=scope, kind=ANONYMOUS, sources=sources)
    by_hash: dict[str, Principal] = {}
    table = data.get("principals") or {}
    if not isinstance(table, Mapping):
        raise ValueError("[principals] must be a table of named principals")
    for name, entry in table.items():
        where = f"[principals.{name}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} must be a table")
        extra = set(entry) - PRINCIPAL_KEYS
        if extra:
            raise ValueError(f"{where}: unknown setting(s) {sorted(extra)}; known: {sorted(PRINCIPAL_KEYS)}")
        scope, sources = scope_from(entry, where)
        principal = Principal(id=f"principal:{name}", name=str(name), scope=scope, kind="key", sources=sources)
        hashes = entry.get("key_sha256", [])
        hashes = [hashes] if isinstance(hashes, str) else hashes
        for h in hashes:
            if not isinstance(h, str) or len(h) != 64 or any(c not in "0123456789abcdef" for c in h.lower()):
                raise ValueError(f"{where}: key_sha256 entries must be 64 hex digits (sha256 of the key)")
            if h.lower() in by_hash:
                raise ValueError(f"{where}: a key is given to two principals")
            by_hash[h.lower()] = principal
    jwt_config = JwtConfig.load(data["jwt"], base) if "jwt" in data else None
    if not by_hash and anonymous is None and jwt_config is None:
        raise ValueError("it grants nothing: give [principals.NAME] entries, [anonymous] or [jwt]")
    return Principals(by_hash, anonymous=anonymous, jwt_config=jwt_config)


def principals_for(settings: Any) -> Principals:
    """The server's principals: its file if it has one, else plain keys (unrestricted), else open."""
    if settings.principals:
        if settings.api_keys:
            raise ServerConfigError(
                "give API keys in the principals file (each with its scope), not with --api-key as well"
            )
        return load_principals(settings.principals)
    if settings.api_keys:
        return Principals(plain_keys=settings.api_keys)
    return Principals(anonymous=OPEN)
