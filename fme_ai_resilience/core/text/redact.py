"""Keep secrets out of logs, the database and exception messages.

Two complementary defences:

* by *name*: values under keys that hold secrets (``token``, ``api_key``, ``Authorization``,
  ``Ocp-Apim-Subscription-Key`` ...) in mappings, headers, URLs' query strings and free text
  (``token=...``, ``Bearer ...``) are replaced by ``[REDACTED]``;
* by *value*: the exact secrets a component knows (its API key, the portal token) are scrubbed
  wherever they appear, even in places no pattern would recognise.

A raw body that failed to parse (cut short, not JSON at all) is the hard case: its token cannot
be read from a parsed object. :func:`token_values` learns the values a body reveals (a ``token``
member, even with an escaped name or escapes in its value, or cut off; ``token=``; ``Bearer``;
``fmetoken``), and :func:`redact_raw` hides secret members in place and those values wherever
they appear, then applies the patterns.

Everything here is pure and total: any input is returned redacted, nothing raises.
"""
from __future__ import annotations

import base64
import functools
import json
import re
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple
from urllib.parse import (parse_qsl, quote, quote_plus, unquote_plus, urlencode, urlsplit,
                          urlunsplit)

__all__ = ["REDACTED", "SECRET_KEYS", "PORTAL_TOKEN_PARAMS", "is_secret_key", "redact_text",
           "redact_url", "without_secret_params", "without_token_params", "scrub_secrets",
           "redact_mapping", "redact_headers", "excerpt", "token_values", "redact_raw"]

REDACTED = "[REDACTED]"

SECRET_KEYS = frozenset({
    "token", "access_token", "refresh_token", "id_token", "portal_token", "fmetoken",
    "api_key", "apikey", "api-key", "x-api-key", "key", "subscription-key",
    "ocp-apim-subscription-key", "authorization", "proxy-authorization",
    "x-esri-authorization", "password", "passwd", "secret", "client_secret", "signature",
    "x-esrihook-signature", "webhook-signature", "x-fair-secret", "cookie", "set-cookie",
    # signed photo URLs: Azure SAS, S3 and GCS pre-signed query parameters, Google API keys
    "sig", "x-amz-signature", "x-amz-security-token", "x-goog-signature", "x-goog-api-key",
})

#: Query parameters that carry a portal token (ArcGIS spellings): the token travels in a header
#: instead, so these are the only parameters taken off a photo URL before it is stored or fetched.
PORTAL_TOKEN_PARAMS = frozenset({"token", "access_token", "access-token", "accesstoken"})

_TEXT_PATTERNS: Tuple[Tuple["re.Pattern[str]", str], ...] = (
    # Authorization-style values: "Bearer abc", "fmetoken token=abc", "Basic abc"
    (re.compile(r"(?i)\b(bearer|basic|fmetoken)(\s+(?:token=)?)[^\s\"',;&]+"),
     r"\1\2" + REDACTED),
    # key=value / key: value / "key": "value" for secret-looking keys
    (re.compile(
        r"(?i)([\"']?\b(?:access_token|refresh_token|token|api[_-]?key|apikey|password|"
        r"secret|client_secret|subscription-key|signature|(?:aws_?)?secret_?access_?key|"
        r"(?:aws_?)?session_?token)\b[\"']?\s*[=:]\s*[\"']?)"
        r"(?!\[REDACTED\])[^\s\"',;&}]+"),
     r"\1" + REDACTED),
    # a raw credential after an Authorization header name (schemes are handled above; an AWS
    # SigV4 value keeps its scheme and credential scope, its Signature= is caught above)
    (re.compile(r"(?i)(\b(?:proxy-|x-esri-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                r"(?!(?:bearer|basic|fmetoken|aws4-hmac-sha256)\s)(?!\[REDACTED\])[^\s\"',;&}]+"),
     r"\1" + REDACTED),
    # secret query parameters inside free text (URLs quoted in exception messages)
    (re.compile(r"(?i)([?&](?:key|sig|x-amz-signature|x-amz-security-token|x-goog-signature)=)"
                r"(?!\[REDACTED\])[^&\s\"'#]+"),
     r"\1" + REDACTED),
    # the password of a URL quoted in free text (a ledger URL: postgresql://user:pw@host/db)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,30}://[^\s/?#@:\"'<>]*:)(?!\[REDACTED\]@)"
                r"[^\s/?#@\"'<>]+@"),
     r"\1" + REDACTED + "@"),
    # API keys recognisable by shape: OpenAI-style sk-..., Google AIza...
    (re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,})"), REDACTED),
)


def is_secret_key(name: Any) -> bool:
    """Whether a mapping key or header name holds a secret."""
    return isinstance(name, str) and name.strip().lower().replace("_", "-") in _NORMALISED


_NORMALISED = frozenset(k.replace("_", "-") for k in SECRET_KEYS)


def secret_forms(secret: str) -> Tuple[str, ...]:
    """``secret`` and the forms an answer may echo it in: JSON-escaped (as ``json.dumps``
    writes it, with ``\\/`` for ``/``, and every character as ``\\uXXXX``), and URL-encoded
    (``%XX``, ``+`` for a space); the longest first, so no form is left half replaced.

    :func:`secret_pattern` matches these and every mixture of them."""
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
             quote(secret, safe=""), quote_plus(secret, safe=""),
             "".join(f"\\u{ord(c):04x}" for c in secret),
             "".join(f"\\u{ord(c):04X}" for c in secret)}
    forms |= {f.replace("/", "\\/") for f in list(forms)}
    return tuple(sorted(forms, key=len, reverse=True))


def _hex(number: int, width: int = 1) -> str:
    """``number`` in hex digits as a pattern matching either case."""
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d
                   for d in format(number, f"0{width}x"))


_JSON_SHORT = {'"': '"', "\\": "\\\\", "/": "/", "\b": "b", "\f": "f", "\n": "n",
               "\r": "r", "\t": "t"}


def _char_forms(char: str) -> Tuple[str, str]:
    """Every way one character of a secret may be written, as two patterns: the forms that do
    not start with a backslash (itself, URL-encoded as its UTF-8 bytes' ``%XX`` or ``+`` for a
    space, an HTML character reference) and what follows the backslashes of a JSON escape
    (``u`` and its UTF-16 code in either case, a surrogate pair, a short escape)."""
    code = ord(char)
    units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10),
                                             0xDC00 + ((code - 0x10000) & 0x3FF)]
    plain = [re.escape(char),
             "".join("%" + _hex(b, 2) for b in char.encode("utf-8", "surrogatepass")),
             f"&#(?:0*{code}|[xX]0*{_hex(code)});"]
    if char == " ":
        plain.append(r"\+")
    escaped = ["u" + _hex(units[0], 4) + "".join(r"\\{1,8}u" + _hex(u, 4) for u in units[1:])]
    if char in _JSON_SHORT:
        escaped.append(re.escape(_JSON_SHORT[char]))
    return "|".join(plain), "|".join(escaped)


def _char_pattern(char: str) -> str:
    """Every way one character (not a backslash) of a secret may be written: as itself,
    JSON-escaped (``\\u`` in either case, a short escape, a surrogate pair; under any number
    of backslashes, as JSON inside JSON writes it), URL-encoded or as an HTML reference."""
    plain, escaped = _char_forms(char)
    return rf"(?:{plain}|\\{{1,8}}(?:{escaped}))"


def _backslashes_pattern(run: int, after: Optional[str]) -> str:
    """``run`` backslashes of a secret, and the character ``after`` them (None: the end), as
    one pattern. Each backslash may be written as itself, JSON-escaped under up to 8 more
    (``\\\\``), as ``\\u005c`` (under 1 to 8), ``%5C`` or ``&#92;``, so the run is written
    as backslashes (``run`` to ``9 * run``) with ``u005c``, ``%5C`` or ``&#92;`` among them;
    the next character's JSON escape adds its own. Every run of backslashes in the text is
    taken whole, up to what follows it, so a text full of backslashes is read once per place
    the secret may start, never split in every possible way."""
    most = 9 * run
    other = r"%5[cC]|&#(?:0*92|[xX]0*5[cC]);"  # a backslash URL-encoded or an HTML reference
    pattern = (rf"(?=(?:(?:u005[cC])*(?:\\|{other})){{{run}}})"  # one at least for each
               rf"(?:\\{{1,{most}}}u005[cC]|\\{{0,{most}}}(?:{other})){{0,{run}}}")
    if after is None:
        return pattern + rf"\\{{0,{most}}}"
    plain, escaped = _char_forms(after)
    return pattern + rf"(?:\\{{0,{most}}}(?:{plain})|\\{{1,{most + 8}}}(?:{escaped}))"


def _secret_chars_pattern(secret: str) -> str:
    """The pattern for ``secret`` written character by character in any of the forms of
    :func:`_char_pattern`, runs of backslashes by :func:`_backslashes_pattern`."""
    parts = []
    i = 0
    while i < len(secret):
        if secret[i] != "\\":
            parts.append(_char_pattern(secret[i]))
            i += 1
            continue
        j = i
        while j < len(secret) and secret[j] == "\\":
            j += 1
        after = secret[j] if j < len(secret) else None
        parts.append("(?:" + _backslashes_pattern(j - i, after) + ")")
        i = j + 1
    return "".join(parts)


@functools.lru_cache(maxsize=64)
def secret_pattern(secret: str) -> "re.Pattern[str]":
    """A pattern matching ``secret`` written in any of :func:`secret_forms` and any mixture of
    them (some characters JSON-escaped, some percent-encoded, the rest as they are), or
    base64-encoded (standard or URL-safe alphabet, padded or not)."""
    raw = secret.encode("utf-8", "surrogatepass")
    encoded = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    encoded |= {e.rstrip("=") for e in encoded}
    whole = sorted((re.escape(e) for e in encoded if len(e) >= 6), key=len, reverse=True)
    return re.compile("|".join(whole + [_secret_chars_pattern(secret)]))


def _replace_secrets(text: str, secrets: Iterable[Optional[str]],
                     learned: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` (known to the caller: configured, so no text can be
    made to match it almost everywhere) replaced in any encoding (:func:`secret_pattern`), and
    each of ``learned`` (read from the text itself) in each of :func:`secret_forms`."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = secret_pattern(secret).sub(REDACTED, text)
    for secret in learned:
        for form in secret_forms(secret):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


def redact_text(text: Any, secrets: Iterable[Optional[str]] = ()) -> str:
    """``text`` with secret-looking values and every known secret value replaced, in any of
    its escaped forms (:func:`secret_forms`)."""
    out = _replace_secrets(text if isinstance(text, str) else str(text), secrets)
    for pattern, replacement in _TEXT_PATTERNS:
        out = pattern.sub(replacement, out)
    return out


def redact_url(url: str, secrets: Iterable[Optional[str]] = ()) -> str:
    """``url`` without secret query parameters or credentials in the authority.

    A URL with neither keeps its exact form (``sqlite:////tmp/x.db`` stays as written).
    """
    return redact_text(_filter_url(url, drop=False), secrets)


def without_secret_params(url: str) -> str:
    """``url`` with its secret query parameters and authority credentials removed altogether.

    For URLs that are used, not shown (an attachment to download): a ``[REDACTED]`` value
    would be sent. Raises ValueError when ``url`` cannot be split as a URL.
    """
    return _filter_url(url, drop=True, strict=True)


def without_token_params(url: str) -> str:
    """``url`` minus its portal-token query parameters (:data:`PORTAL_TOKEN_PARAMS`).

    Every other parameter keeps its exact bytes, in order: the signature of a pre-signed URL
    (``sig``, ``X-Amz-Signature``, ``X-Goog-Signature``) covers its encoding too. A URL with no
    such parameter comes back as the same text. Raises ValueError when ``url`` cannot be split
    as a URL.
    """
    parts = urlsplit(url)
    if not parts.query:
        return str(url)
    pairs = parts.query.split("&")
    kept = [p for p in pairs
            if unquote_plus(p.partition("=")[0]).strip().lower() not in PORTAL_TOKEN_PARAMS]
    if len(kept) == len(pairs):
        return str(url)
    return urlunsplit(parts._replace(query="&".join(kept)))


def _filter_url(url: str, drop: bool, strict: bool = False) -> str:
    """``url`` with secret query parameters dropped or redacted and credentials removed;
    unchanged (same text) when it carries neither."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if netloc == parts.netloc and not any(is_secret_key(k) for k, _ in pairs):
            return str(url)
        kept = [(k, v) for k, v in pairs if not is_secret_key(k)] if drop else [
            (k, REDACTED if is_secret_key(k) else v) for k, v in pairs]
        return urlunsplit((parts.scheme, netloc, parts.path, urlencode(kept, safe="[]"),
                           parts.fragment))
    except ValueError:
        if strict:
            raise
        return str(url)


def scrub_secrets(value: Any, secrets: Iterable[Optional[str]], _depth: int = 0) -> Any:
    """A deep copy of a JSON-like value with every known secret value replaced, and nothing
    else touched: no key names or patterns (for business data such as survey attributes)."""
    known = tuple(s for s in secrets if s and len(s) >= 4)
    if not known:
        return value
    if _depth > 64:
        return REDACTED
    if isinstance(value, str):
        return _replace_secrets(value, known)
    if isinstance(value, Mapping):
        return {scrub_secrets(k, known, _depth + 1): scrub_secrets(v, known, _depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_secrets(v, known, _depth + 1) for v in value]
    return value


def redact_mapping(value: Any, secrets: Iterable[Optional[str]] = (), _depth: int = 0) -> Any:
    """A deep copy of a JSON-like value with secret keys' values and known secrets replaced."""
    known = tuple(secrets)
    if _depth > 64:
        return REDACTED
    if isinstance(value, Mapping):
        return {k: (REDACTED if is_secret_key(k) and v not in (None, "")
                    else redact_mapping(v, known, _depth + 1))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_mapping(v, known, _depth + 1) for v in value]
    if isinstance(value, str):
        return redact_text(value, known)
    return value


def redact_headers(headers: Optional[Mapping[str, Any]]) -> dict:
    """Headers safe to log or store: secret headers keep their name, lose their value."""
    return {str(k): (REDACTED if is_secret_key(k) else redact_text(v))
            for k, v in (headers or {}).items()}


def excerpt(text: Any, limit: int = 2048, secrets: Iterable[Optional[str]] = ()) -> str:
    """A redacted excerpt of at most ``limit`` characters (for dead letters and outcomes)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text[: limit * 4]).decode("utf-8", errors="replace")
    cleaned = redact_text(text, secrets)
    return cleaned if len(cleaned) <= limit else cleaned[: max(0, limit - 1)] + "…"


# -- raw bodies that did not parse -------------------------------------------------------------

#: A JSON member with a string value, as written: a name such as a secret has (letters,
#: digits, ``_`` and ``-``, any of them possibly written as ``\\uXXXX``; at most 40) and the
#: value up to its closing quote or, in a body cut short, the end (even in the middle of an
#: escape). Every character of the name
#: matches one way only, so no body makes the scan backtrack far.
_MEMBER = re.compile(r'"((?:[A-Za-z0-9_-]|\\u[0-9A-Fa-f]{4}){1,40})"\s*:\s*'
                     r'"((?:[^"\\]|\\.)*(?:\\\Z)?)("|\Z)', re.S)
#: Credentials in free text whose value is worth learning: token=..., Bearer ..., fmetoken ...
_CREDENTIAL = re.compile(
    r"(?i)(?:(?<![a-z0-9_-])(?:access[_-]?token|token)=|\b(?:bearer|fmetoken)\s+(?:token=)?)"
    r"([^\s\"',;&}]+)")


#: A token is a few hundred characters; longer "values" are text, not tokens. A body reveals
#: one token: past this many values the rest are not learnt (a crafted body cannot make the
#: scrubbing costly).
_MAX_TOKEN_CHARS = 2048
_MAX_TOKEN_VALUES = 16


def _json_string(written: str) -> str:
    """A JSON string's text as written, decoded (as written when its escapes do not decode)."""
    if "\\" not in written:
        return written
    try:
        decoded = json.loads(f'"{written}"')
    except ValueError:
        return written
    return decoded if isinstance(decoded, str) else written


def token_values(text: str) -> Tuple[str, ...]:
    """Every portal-token value ``text`` reveals, as written and decoded (4 characters or more).

    Read from ``token``-named JSON members (the name may be written with escapes, the value may
    hold escapes or be cut off by the end of the text) and from ``token=``, ``Bearer`` and
    ``fmetoken`` credentials; at most 16 values of at most 2048 characters. For bodies that did
    not parse, whose token cannot be read from a parsed object.
    """
    usable: Dict[str, None] = {}

    def learn(*values: str) -> bool:
        usable.update((v, None) for v in values if 4 <= len(v) <= _MAX_TOKEN_CHARS)
        return len(usable) >= _MAX_TOKEN_VALUES

    for match in _MEMBER.finditer(text):
        name, value = match.group(1), match.group(2)
        if _json_string(name).lower() in PORTAL_TOKEN_PARAMS and learn(value, _json_string(value)):
            break
    for match in _CREDENTIAL.finditer(text):
        if learn(match.group(1)):
            break
    return tuple(usable)[:_MAX_TOKEN_VALUES]


def redact_raw(text: str, secrets: Iterable[Optional[str]] = ()) -> str:
    """A raw body (JSON, JSON cut short, or anything else) fit to store or log.

    The values of secret-named members are replaced in place (names written with escapes too,
    values with escapes, a value the end of the text left open); every value in ``secrets``
    and every token value the text reveals is replaced wherever it appears, and so is a start
    of one left at the very end of the text; then the :func:`redact_text` patterns apply.
    """
    given = tuple(s for s in secrets if s and len(s) >= 4)
    learned = tuple(sorted({s for s in token_values(text) if len(s) >= 4}, key=len,
                           reverse=True))
    known = sorted({*given, *learned}, key=len, reverse=True)

    def member(match: "re.Match[str]") -> str:
        if not is_secret_key(_json_string(match.group(1))) or not match.group(2):
            return match.group(0)
        start = match.start(2) - match.start(0)
        return match.group(0)[:start] + REDACTED + match.group(3)

    out = _replace_secrets(_MEMBER.sub(member, text), given, learned)
    cut = max((size for secret in known  # the longest start of a secret ending the text
               for size in range(min(len(secret) - 1, len(out)), 3, -1)
               if out.endswith(secret[:size])), default=0)
    if cut:
        out = out[:-cut] + REDACTED
    return redact_text(out)
