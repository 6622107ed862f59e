"""Principals and scopes without a server: the config file, API keys, JWT verification
(PyJWT, HS256 and RS256/ES256 from a JWKS file) and the narrowing rule."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as hs

from sleuth.search.base import Filters, Passage
from sleuth.server import ServerConfigError, ServerSettings, create_app
from sleuth.server.principals import AuthError, load_principals
from sleuth.server.scoping import ScopeError, duplicated_key, effective_scope

ISS, AUD = "https://login.example", "sleuth"


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def write(tmp: Path, text: str, name: str = "principals.toml") -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


# -- the file ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[principals.a]\nkey_sha256 = ['00']\nacl = ['all']\n", "64 hex digits"),
        (f"[principals.a]\nkey_sha256 = ['{'a' * 64}']\n", "'acl' is required"),
        (f"[principals.a]\nkey_sha256 = ['{'a' * 64}']\nacl = 3\n", "'acl' must be"),
        (f"[principals.a]\nkey_sha256 = ['{'a' * 64}']\nacl = ['x']\nfilters = ['acl=y']\n", "not in 'filters'"),
        (f"[principals.a]\nkey_sha256 = ['{'a' * 64}']\nacl = ['x']\nfilters = ['nonsense']\n", "key=value"),
        (f"[principals.a]\nkey_sha256 = ['{'a' * 64}']\nacl = ['x']\nkeys = []\n", "unknown setting"),
        (f"[principals.a]\nkey_sha256='{'a' * 64}'\nacl='x'\n[principals.b]\nkey_sha256='{'a' * 64}'\nacl='x'\n",
         "two principals"),
        ("[admins]\nacl = '*'\n", "unknown table"),
        ("", "grants nothing"),
        ("[jwt]\nalgorithms = ['none']\nissuer = 'i'\naudience = 'a'\n", "refused"),
        ("[jwt]\nalgorithms = ['HS257']\nissuer = 'i'\naudience = 'a'\n", "refused"),
        ("[jwt]\nalgorithms = ['HS256']\naudience = 'a'\nsecret_env = 'X'\n", "'issuer' is required"),
        ("[jwt]\nalgorithms = ['HS256']\nissuer = 'i'\naudience = 'a'\n", "secret_env"),
        ("[jwt]\nalgorithms = ['HS256']\nissuer = 'i'\naudience = 'a'\nsecret_env = 'SLEUTH_T_SHORT'\n", "32 bytes"),
        ("[jwt]\nalgorithms = ['RS256']\nissuer = 'i'\naudience = 'a'\n", "jwks_file"),
        ("[jwt]\nalgorithms = ['RS256']\nissuer = 'i'\naudience = 'a'\njwks_file = 'nope.json'\n", "JWKS"),
        ("[jwt]\nalgorithms = ['HS256']\nissuer = 'i'\naudience = 'a'\nsecret_file = 'nope'\n", "nope"),
        ("not toml = = 1", "cannot read"),
    ],
)  # fmt: skip
def test_a_bad_principals_file_is_refused_with_one_sentence(tmp_path, monkeypatch, text, message) -> None:
    monkeypatch.setenv("SLEUTH_T_SHORT", "short")
    with pytest.raises(ServerConfigError, match=message):
        load_principals(write(tmp_path, text))


def test_keys_map_to_principals_and_unknown_keys_get_401(tmp_path: Path) -> None:
    k_fin, k_all = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    p = write(
        tmp_path,
        f"[principals.fin]\nkey_sha256 = ['{sha(k_fin)}']\nacl = ['all', 'finance']\nfilters = {{version = '2025'}}\n"
        f"[principals.staff]\nkey_sha256 = '{sha(k_all)}'\nacl = 'all'\nsources = ['policy']\n",
    )
    ps = load_principals(p)
    fin = ps.resolve(k_fin)
    assert fin.name == "fin" and fin.scope == Filters.make({"version": "2025"}, acl=["all", "finance"])
    assert ps.resolve(k_all).sources == frozenset({"policy"})
    assert k_fin not in repr(fin) and k_fin not in fin.id
    for bad in ("wrong", k_fin + "x", k_fin.upper(), None, ""):
        with pytest.raises(AuthError):
            ps.resolve(bad)
    # JSON works too, and [anonymous] gives requests without credentials a scope
    pj = write(tmp_path, json.dumps({"anonymous": {"acl": ["all"], "filters": ["region=境内"]}}), "p.json")
    anon = load_principals(pj).resolve(None)
    assert anon.kind == "anonymous" and anon.scope == Filters.make({"region": "境内"}, acl=["all"])
    with pytest.raises(AuthError, match="not known"):
        load_principals(pj).resolve("some-key")


def test_settings_refuse_plain_keys_beside_a_principals_file(tmp_path: Path) -> None:
    p = write(tmp_path, "[anonymous]\nacl = ['all']\n")
    with pytest.raises(ServerConfigError, match="principals file"):
        create_app(ServerSettings(api_keys=("k",), principals=str(p)), open_on_startup=False)
    create_app(ServerSettings(host="0.0.0.0", principals=str(p)), open_on_startup=False)  # a principals file suffices


# -- JWTs ------------------------------------------------------------------------------------
def _pem(key: Any) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return {
        "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ec": ec.generate_private_key(ec.SECP256R1()),
    }


@pytest.fixture
def jwt_principals(tmp_path: Path, keys: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, bytes]:
    secret = secrets.token_bytes(32).hex().encode()
    monkeypatch.setenv("SLEUTH_T_JWT", secret.decode())
    jwks = {"keys": [
        {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["rsa"].public_key())), "kid": "r1", "alg": "RS256"},
        {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(keys["ec"].public_key())), "kid": "e1"},
    ]}  # fmt: skip
    (tmp_path / "keys.jwks.json").write_text(json.dumps(jwks))
    p = write(
        tmp_path,
        "[jwt]\nalgorithms = ['HS256', 'RS256', 'ES256']\nsecret_env = 'SLEUTH_T_JWT'\njwks_file = 'keys.jwks.json'\n"
        f"issuer = '{ISS}'\naudience = '{AUD}'\nscope_claim = 'sleuth_scope'\n",
    )
    return load_principals(p), secret


def claims(**over: Any) -> dict[str, Any]:
    c = {"iss": ISS, "aud": AUD, "sub": "alice", "exp": int(time.time()) + 300,
         "sleuth_scope": {"acl": ["all", "hr"], "filters": {"region": "境内"}}}  # fmt: skip
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def test_valid_tokens_give_the_scope_of_their_claim(jwt_principals, keys) -> None:
    ps, secret = jwt_principals
    for tok in (
        jwt.encode(claims(), secret, "HS256"),
        jwt.encode(claims(), _pem(keys["rsa"]), "RS256", headers={"kid": "r1"}),
        jwt.encode(claims(), _pem(keys["ec"]), "ES256", headers={"kid": "e1"}),
        jwt.encode(claims(), _pem(keys["ec"]), "ES256"),  # no kid: the one EC key fits
    ):
        p = ps.resolve(tok)
        assert p.name == "alice" and p.kind == "jwt" and p.id == f"jwt:{ISS}:alice"
        assert p.scope == Filters.make({"region": "境内"}, acl=["all", "hr"])
    assert ps.resolve(jwt.encode(claims(sleuth_scope=["all"]), secret, "HS256")).scope == Filters.make(acl=["all"])


def forged_hs256(key: bytes) -> str:
    """A token signed with HS256 using ``key`` (a public key, in the algorithm-confusion attack)."""

    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "r1"}).encode())
    body = b64(json.dumps(claims()).encode())
    sig = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


def test_invalid_expired_wrongly_signed_and_none_tokens_get_refused(jwt_principals, keys) -> None:
    ps, secret = jwt_principals
    other = secrets.token_bytes(32)
    rsa_pub_pem = (
        keys["rsa"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    none_tok = jwt.encode(claims(), None, "none")
    header_none_sig = jwt.encode(claims(), secret, "HS256").rsplit(".", 1)[0].split(".")[1]
    cases = {
        "expired": (jwt.encode(claims(exp=int(time.time()) - 10), secret, "HS256"), "expired"),
        "wrong secret": (jwt.encode(claims(), other, "HS256"), "signature"),
        "wrong rsa key": (
            jwt.encode(claims(), _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "RS256",
                       headers={"kid": "r1"}), "signature"),
        "alg none": (none_tok, "algorithm"),
        "alg none, HS payload": ("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + header_none_sig + ".", "algorithm"),
        "unknown alg": (jwt.encode(claims(), secret * 2, "HS512"), "algorithm"),
        "wrong issuer": (jwt.encode(claims(iss="https://evil.example"), secret, "HS256"), "issuer"),
        "wrong audience": (jwt.encode(claims(aud="other"), secret, "HS256"), "audience"),
        "no exp": (jwt.encode(claims(exp=None), secret, "HS256"), "exp"),
        "no subject": (jwt.encode(claims(sub=None), secret, "HS256"), "sub"),
        "no scope claim": (jwt.encode(claims(sleuth_scope=None), secret, "HS256"), "scope claim"),
        "bad scope claim": (jwt.encode(claims(sleuth_scope={"filters": ["region=x"]}), secret, "HS256"), "acl"),
        "unknown kid": (jwt.encode(claims(), _pem(keys["rsa"]), "RS256", headers={"kid": "zz"}), "kid"),
        "HS256 signed with the RSA public key": (forged_hs256(rsa_pub_pem), "signature"),
        "garbage": ("a.b.c", "not known"),
    }  # fmt: skip
    for name, (tok, why) in cases.items():
        with pytest.raises(AuthError, match=f"(?i){why}"):
            ps.resolve(tok)
            pytest.fail(name)


# -- the narrowing rule --------------------------------------------------------------------------
HELD = Filters.make({"region": ["境内", "境外"]}, {"year": (2020, 2025)}, acl=["all", "finance"])


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ([], HELD),
        (["acl=all"], Filters.make({"region": ["境内", "境外"]}, {"year": (2020, 2025)}, acl=["all"])),
        (["region=境内", "version=2025"], Filters.make({"region": "境内", "version": "2025"}, {"year": (2020, 2025)},
                                                     acl=["all", "finance"])),
        (["year>=2022"], Filters.make({"region": ["境内", "境外"]}, {"year": (2022, 2025)}, acl=["all", "finance"])),
        (["year=2021"], Filters.make({"region": ["境内", "境外"], "year": "2021"}, {"year": (2020, 2025)},
                                     acl=["all", "finance"])),
    ],
)  # fmt: skip
def test_requests_narrow_the_scope(asked, expected) -> None:
    assert effective_scope(HELD, Filters.parse(asked)) == expected


@pytest.mark.parametrize(
    ("asked", "part"),
    [
        (["acl=hr"], "acl"),
        (["acl=all,hr"], "acl"),
        (["acl=Finance"], "acl"),
        (["ACL=finance"], "ACL"),
        (["Acl=all"], "Acl"),
        (["ａｃｌ=all"], "ａｃｌ"),
        (["Region=境内"], "Region"),
        (["region=境内,other"], "region"),
        (["year>=2019"], "year"),
        (["year<=2030"], "year"),
        (["year=2030"], "year"),
    ],
)
def test_widening_is_refused_and_named(asked, part) -> None:
    with pytest.raises(ScopeError) as e:
        effective_scope(HELD, Filters.parse(asked))
    assert e.value.part == part
    assert "outside your scope" in e.value.message or "names are exact" in e.value.message
    with pytest.raises(ScopeError, match="acl"):
        effective_scope(HELD, Filters.from_dict({"equals": {"acl": ["hr"]}}))


LABELS = ["all", "finance", "hr"]
REGIONS = ["境内", "境外", "x"]


def passages() -> Any:
    return hs.builds(
        lambda acl, region, version: Passage(id="p", text="t", acl=acl, region=region, version=version),
        hs.lists(hs.sampled_from(LABELS), max_size=2),
        hs.sampled_from(REGIONS),
        hs.sampled_from(["2024", "2025"]),
    )


def scopes() -> Any:
    return hs.builds(
        lambda acl, regions, versions: Filters.make(
            {k: v for k, v in (("region", regions), ("version", versions)) if v}, acl=acl
        ),
        hs.one_of(hs.none(), hs.sets(hs.sampled_from([*LABELS, "Finance"]), max_size=3)),
        hs.lists(hs.sampled_from(REGIONS), max_size=2),
        hs.lists(hs.sampled_from(["2024", "2025"]), max_size=2),
    )


@settings(max_examples=300, deadline=None, database=None)
@given(held=scopes(), asked=scopes(), ps=hs.lists(passages(), min_size=1, max_size=8))
def test_the_effective_scope_never_reaches_outside_either_scope(held, asked, ps) -> None:
    try:
        eff = effective_scope(held, asked)
    except ScopeError:
        return
    for p in ps:
        if eff.matches(p):
            assert held.matches(p) and asked.matches(p), (held, asked, eff, p)


def test_duplicated_keys_are_found_at_any_depth() -> None:
    assert duplicated_key(b'{"filters": {"acl": ["all"], "acl": ["finance"]}}') == "acl"
    assert duplicated_key(b'{"filters": [], "question": "q", "filters": ["acl=finance"]}') == "filters"
    assert duplicated_key(b'{"filters": {"acl": ["all"]}}') is None
    assert duplicated_key(b"not json") is None
