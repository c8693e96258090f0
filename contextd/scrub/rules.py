"""What the secret scrubber recognises: provider token formats, names that hold a secret,
placeholders that do not, and what a random value looks like.

The token formats are a curated table taken from gitleaks' rule set (``config/gitleaks.toml``)
and the detect-secrets plugins, reduced to the formats whose shape alone is a secret (a fixed
prefix and a length). detect-secrets itself is not used: it reports secrets in files for a
pre-commit hook (one regex pass per plugin per line, entropy scans on every string) and has no
redaction; the scrubber must run over every indexed byte and rewrite values in place, keeping
the surrounding text, so it runs its own patterns only on the lines that hold a keyword or a
marker (see :mod:`contextd.scrub.candidates`).

Two tiers of names: a *strong* name (password, secret, token, api_key, jwt, credentials, ...)
holds a secret whatever its value looks like, unless the value is an obvious placeholder
(``"dummy"``, ``"<your-token>"``, ``"${TOKEN}"``); a *weak* name (``signing_key``, ``stripeKey``,
``hmac``, ``signature``) holds one only when the value looks random, so ``cache_key = "user:1"``
stays readable.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from contextd.text.languages import path_suffix

# (rule, markers, regex): every match contains one of the case-sensitive literals of
# ``markers`` (separated by "|"), so a line without any marker is never searched.
TOKEN_FORMATS: tuple[tuple[str, str, str], ...] = (
    ("aws-access-key-id", "AKIA|ASIA", r"(?:AKIA|ASIA)[A-Z0-9]{16}"),
    ("github-token", "ghp_|gho_|ghu_|ghs_|ghr_", r"gh[pousr]_[A-Za-z0-9]{36,}"),
    ("github-fine-grained-pat", "github_pat_", r"github_pat_[A-Za-z0-9_]{40,}"),
    ("gitlab-token", "glpat-", r"glpat-[A-Za-z0-9_-]{20,}"),
    ("slack-token", "xox", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    ("slack-webhook", "hooks.slack.com",
     r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/]{20,}"),
    ("discord-webhook", "/api/webhooks/", r"(?<=/api/webhooks/)\d{17,20}/[A-Za-z0-9_-]{60,68}"),
    ("teams-webhook", "webhook.office.com",
     r"(?<=\.webhook\.office\.com/webhookb2/)[A-Za-z0-9@/_-]{60,}"),
    ("vault-token", "hvs.|hvb.|hvr.", r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    ("jwt", "eyJ", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("stripe-secret-key", "sk_|rk_", r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}"),
    ("stripe-webhook-secret", "whsec_", r"whsec_[A-Za-z0-9]{24,}"),
    ("twilio-api-key", "SK", r"SK[0-9a-fA-F]{32}"),
    ("sendgrid-api-key", "SG.", r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    ("anthropic-api-key", "sk-ant-", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-api-key", "sk-", r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*\d)"
                              r"(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]{32,}"),
    ("google-api-key", "AIza", r"AIza[0-9A-Za-z_-]{35}"),
    ("google-oauth-client-secret", "GOCSPX-", r"GOCSPX-[A-Za-z0-9_-]{28}"),
    ("google-oauth-access-token", "ya29.", r"ya29\.[0-9A-Za-z_-]{20,}"),
    ("npm-token", "npm_", r"npm_[A-Za-z0-9]{36}"),
    ("pypi-token", "pypi-", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    ("huggingface-token", "hf_", r"hf_[A-Za-z0-9]{34,}"),
    ("digitalocean-token", "_v1_", r"do[opr]_v1_[a-f0-9]{64}"),
    ("shopify-token", "shpat_|shpss_", r"shp(?:at|ss)_[a-fA-F0-9]{32}"),
    ("mailgun-key", "key-", r"key-[0-9a-f]{32}"),
    ("mailchimp-key", "-us", r"[0-9a-f]{32}-us\d{1,2}"),
    ("square-token", "sq0", r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}"),
    ("databricks-token", "dapi", r"dapi[a-f0-9]{32}"),
    ("age-secret-key", "AGE-SECRET-KEY-", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    ("telegram-bot-token", ":AA", r"\d{8,10}:AA[0-9A-Za-z_-]{33}"),
)
# Every marker costs one scan of every indexed text: keep them few (AWS ids of users, roles
# and groups, and GitLab's rarer token types, are left to the context rule).
TOKEN_MARKERS = tuple(sorted({m for _, markers, _ in TOKEN_FORMATS
                              for m in markers.split("|")}))

# Lower-case substrings that put a line under the name and context rules.
KEYWORDS = ("pass", "pwd", "secret", "token", "key", "jwt", "bearer", "basic ", "auth",
            "credential", "sign", "hmac", "://", "-u", "--user", "mysql", "mariadb", "login",
            "vault", "sig=")

# Names whose value is a secret whatever it looks like (placeholders aside) ...
STRONG_NAME = (r"password|passwd|pwd|passphrase|secrets?|token|jwt|credentials?"
               r"|api[_-]?keys?|apikey|access[_-]?key(?:[_-]?secret)?|secret[_-]?key"
               r"|private[_-]?key(?:[_-]?id)?|client[_-]?secret|auth[_-]?token"
               r"|(?:become|ssh|sudo|su)[_-]?pass")  # Ansible's ansible_become_pass
# ... and names whose value is one only when it looks random.
WEAK_NAME = r"keys?|signing[_-]?key|signature|hmac|salt|auth|authorization|cookie|pass"
_STRONG = re.compile(rf"(?i)(?:{STRONG_NAME})$")

# Words (identifier parts) that make a random-looking value on the same line a secret: a
# Markdown table row, a positional argument (``hmac.new(b"9f86…", …)``), a YAML list item.
CONTEXT_WORDS = frozenset((
    "key", "keys", "secret", "secrets", "token", "tokens", "jwt", "password", "passwd", "pwd",
    "passphrase", "auth", "authorization", "bearer", "credential", "credentials", "signing",
    "signature", "signer", "sign", "hmac", "apikey", "private"))
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")

# Values that are no secret: empty-ish literals, references to the environment or a template,
# and the words people use for a stand-in.
_LITERALS = frozenset({"[redacted]", "none", "null", "true", "false", "nil", "undefined", "",
                       "password", "secret", "token", "pass", "string", "str", "required",
                       "optional", "yes", "no", "on", "off",
                       # fetch()'s ``credentials`` option
                       "same-origin", "include", "omit",
                       # GitHub workflow permissions (``id-token: write``)
                       "read", "write", "read-all", "write-all"})
# Template fields and format specifiers: a value made of these and punctuation only
# (``'{0}:{1}'``, ``"%s:%s"``, ``"'"``) holds no secret.
_TEMPLATE_FIELD = re.compile(r"\{[\w.!:]*\}|%\(?\w*\)?[sdr]|\$\{?\w+\}?")
_REFERENCE = re.compile(
    r"(?i)[x*.#_-]+|0+|<[^<>]*>|\$\{?[\w.:-]*\}?|\$?\{\{.*\}\}|\{[\w.]*\}|%\(?\w*\)?s|\$\(.*\)"
    r"|(?:process\.env|os\.environ|env)[.\[][\w.\[\]\"']*")
_DUMMY = re.compile(
    r"(?i)dummy|fake|example|sample|placeholder|change[_-]?me|replace[_-]?me|redacted"
    r"|not[_-]?(?:a[_-]?)?real|xxxx|your[_-]|insert[_-]|mock|^test(?:ing)?(?:[_-]?\w{0,12})$"
    r"|^(?:foo|bar|baz|foobar|secret|password|token)\d*$")
# A value that names a secret instead of holding one: words (no digit) among which one says
# what it stands for (``"my-secret"``, ``"X-Xet-Access-Token"``, ``"challengePassword"``,
# ``"Use a User Access Token."``, ``get_token()``); a real password with a digit or a symbol
# stays a secret.
_NAMING_VALUE = re.compile(r"[A-Za-z _.,`()/-]+")
_NAME_WORD = re.compile(r"(?i)pass(?:word|wd|phrase)?|pwd|secret|token|key|credential|jwt|auth")
# Values cut short on purpose in documentation: ``"hf_..."``, ``"hf_***"``, ``"sk-…"``.
_ELIDED = ("...", "…", "***")
# A regular expression, not a secret: a character range or class, a group's flags.
_REGEX_VALUE = re.compile(r"\[[^\]]*(?:a-z|A-Z|0-9)[^\]]*\]|\\[dwsDWS]|\(\?[:=!P<]")
# Public constants that look random: the CACHEDIR.TAG signature (bford.info/cachedir).
KNOWN_PUBLIC = frozenset({"8a477f597d28d172789f06886806bc55"})
# In code, shorter than any secret worth the name (``{col_token: "min"}``); a configuration
# file's ``API_KEY=xyz`` is still its value.
MIN_CODE_SECRET_CHARS = 4

# Random-looking values, and the look-alikes that are not secrets.
_HEX = re.compile(r"[0-9a-fA-F]{32,}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}")
_WORDY_SEGMENT = re.compile(r"[a-z]+|[A-Z][a-z]+|[A-Z]+|\d+|[a-z]+(?:[A-Z][a-z]{2,})+"
                            r"|(?:[A-Z][a-z]{2,})+")
_SEPARATORS = re.compile(r"[_\-./+~=]+")
RANDOM_TOKEN = re.compile(r"(?<![\w+/=~.-])[A-Za-z0-9+/_~-]{16,}={0,2}(?![\w+/=~-])")
# A digest is named by its algorithm right before it (lockfiles, pip, go.sum, images), a
# commit by the word, a public key by its type.
DIGEST_PREFIX = re.compile(r"(?i)(?:(?:sha\d{0,3}|md5|blake\d\w*|h1|base64)[:=,-]"
                           r"|\b(?:commit|revision|rev|merge)\s+"
                           r"|\b(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-nistp\d+)\s+)\s*$")
MIN_RANDOM_LENGTH = 16
MIN_ENTROPY_BITS = 3.0
MIN_BLOB_LENGTH = 30
MIN_DIGIT_SWITCHES = 3
MIN_MIXED_LENGTH = 24
MIN_CLASS_SWITCH_SHARE = 0.35
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_~.-]+")
# An identifier ends with a capitalised word that says what it holds (random text ends so
# about once in a million).
_IDENTIFIER_END = re.compile(r"[A-Za-z0-9](?:Key|Keys|Token|Secret|Signer|Signature|Password)$")


# Values that are no secret though a secret's name holds them: a password hash in the
# modular crypt or PHC format (argon2, bcrypt, Django's ``pbkdf2_sha256$…``, ``md5$salt$…``)
# and a version (``jsonwebtoken: 9.0.3`` in a lockfile).
PASSWORD_HASH = re.compile(
    r"\$(?:argon2(?:id|i|d)|2[abxy]?|pbkdf2[\w-]*|scrypt|[156]|y|gy|7)\$\S+"
    r"|(?:argon2|bcrypt(?:_sha256)?|pbkdf2_sha\d+|pbkdf2_sha1|scrypt|md5|sha1)\$\S*\$\S+")
_VERSION = re.compile(r"[~^<>=v]*\d+(?:\.\d+){1,3}(?:[-+.][\w.]+)?")


def is_placeholder(value: str) -> bool:
    """Whether a value assigned to a secret's name is a stand-in (or a hash or a version),
    not a secret."""
    v = value.strip()
    if PASSWORD_HASH.fullmatch(v) or _VERSION.fullmatch(v):
        return True
    if not any(c.isalnum() for c in _TEMPLATE_FIELD.sub("", v)):
        return True
    if v.endswith(_ELIDED) or v in KNOWN_PUBLIC:
        return True
    if _NAMING_VALUE.fullmatch(v.replace("%20", " ")) and _NAME_WORD.search(v):
        return True
    return (v.lower() in _LITERALS or _REGEX_VALUE.search(v) is not None
            or _REFERENCE.fullmatch(v) is not None
            or _DUMMY.search(v) is not None)


def shannon_entropy(value: str) -> float:
    """Bits per character."""
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def looks_random(value: str) -> bool:
    """Whether ``value`` looks like generated key material rather than an identifier, a
    path, a version or words: a long hex string; a long base64 blob with no word in it; or
    letters and digits interleaved again and again (an identifier such as ``pkcs7_signer``
    or ``CallSignaturePEP302`` switches between letters and digits once or twice; 20 random
    alphanumerics about five times). UUIDs and references (``${TOKEN}``) do not count;
    stand-in words do not matter here (AWS's own example key is random)."""
    if len(value) < MIN_RANDOM_LENGTH or _UUID.fullmatch(value) or _REFERENCE.fullmatch(value):
        return False
    if value.count(".") >= 3 or _IDENTIFIER_END.search(value) or value in KNOWN_PUBLIC:
        return False  # a dotted name (package, host), ``MLKEM768X25519PrivateKey``
    if not _TOKEN_CHARS.fullmatch(value):  # calls, operators, format strings: code
        return False
    if _HEX.fullmatch(value):
        return len(set(value)) > 6
    segments = [s for s in _SEPARATORS.split(value) if s]
    wordy = sum(len(s) for s in segments if len(s) >= 3 and _WORDY_SEGMENT.fullmatch(s))
    if wordy * 2 > len(value) or shannon_entropy(value) < MIN_ENTROPY_BITS:
        return False
    if ("/" in value or "+" in value) and len(value) >= MIN_BLOB_LENGTH and not wordy:
        return True
    pairs = [(a, b) for s in segments for a, b in zip(s, s[1:])]
    if sum(a.isdigit() != b.isdigit() for a, b in pairs) >= MIN_DIGIT_SWITCHES:
        return True
    # Long mixed-case runs with a digit: random text changes case about every other
    # character, camelCase words every five or six.
    classes = sum(_char_class(a) != _char_class(b) for a, b in pairs)
    return (len(value) >= MIN_MIXED_LENGTH and any(c.isdigit() for c in value)
            and classes >= MIN_CLASS_SWITCH_SHARE * len(value))


def _char_class(c: str) -> int:
    return 0 if c.isdigit() else 1 if c.isupper() else 2 if c.islower() else 3


def is_strong_name(name: str) -> bool:
    """Whether a setting called ``name`` holds a secret whatever its value looks like."""
    return _STRONG.search(name) is not None


def has_context_word(line: str) -> bool:
    """Whether an identifier part of ``line`` says key, secret, token, password, ..."""
    return any(w.lower() in CONTEXT_WORDS for w in _WORDS.findall(line))


# ----- files that are never indexed ----------------------------------------------------
# Template-style env files document the variables and are indexed (scrubbed).
ENV_TEMPLATES = frozenset({".env.example", ".env.sample", ".env.template", ".env.dist",
                           ".env.defaults"})
KEY_FILE_NAMES = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk",
                            "id_ed25519_sk", ".netrc", "_netrc", ".pgpass", ".htpasswd",
                            ".git-credentials", "credentials.db", ".pypirc"})
KEY_FILE_SUFFIXES = frozenset({".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk",
                               ".p8", ".der", ".gpg", ".kdbx", ".tfstate", ".ovpn"})

# The spec's opt-out by name: a user marks a file never to be indexed by calling it
# ``notes.private`` or ``tokens.secret``.
PRIVATE_SUFFIXES = frozenset({".private", ".secret"})


def secret_file_reason(name: str) -> str | None:
    """Why a file called ``name`` holds secrets and is never indexed (whatever the extension
    settings say), or None."""
    lower = name.lower()
    if lower in ENV_TEMPLATES:
        return None
    if lower == ".env" or lower.startswith(".env.") or lower.endswith(".env"):
        return "an environment file (.env) holds live secrets; only .env.example-style " \
               "templates are indexed"
    if lower in KEY_FILE_NAMES:
        return "a credentials or private key file"
    suffix = path_suffix(lower)  # the walk asks for every file's name
    if suffix in KEY_FILE_SUFFIXES:
        return f"{suffix} files hold keys or certificates"
    if suffix in PRIVATE_SUFFIXES:
        return f"named {suffix}: kept out by naming convention"
    return None
