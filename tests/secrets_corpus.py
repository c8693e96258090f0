"""A planted-credential corpus, generated from a seed: real-format secrets of every kind the
scrubber promises to catch, in the places people put them (assignments, arguments, dicts,
YAML, JSON, env lines, Markdown prose, tables and code blocks) across many file types, and
look-alikes that must survive (lockfile hashes, UUIDs, git SHAs, base64 images, dummy test
tokens, CSS colours). Shared by tests/test_secrets_corpus.py and benchmarks/bench_scrub.py.

Every value is random, so no test can pass by knowing the values, and each one is unique in
the corpus, so "absent from the index" is a plain substring check.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from dataclasses import dataclass, field

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


@dataclass
class Planted:
    """One value in the corpus: its kind and the file it is in."""

    kind: str
    value: str
    path: str


@dataclass
class Corpus:
    files: dict[str, str] = field(default_factory=dict)
    secrets: list[Planted] = field(default_factory=list)
    lookalikes: list[Planted] = field(default_factory=list)


class _Values:
    """Random values in each format (every one has a digit and both cases where the real
    format has them, like the real thing)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def chars(self, alphabet: str, n: int) -> str:
        classes = [cls for cls in (str.isdigit, str.isupper, str.islower)
                   if any(cls(c) for c in alphabet)]
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            if all(any(cls(c) for c in value) for cls in classes):
                return value

    def jwt(self) -> str:
        def part(obj) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
        header = part({"alg": "HS256", "typ": "JWT"})
        payload = part({"sub": self.chars(string.digits, 10), "iat": self.rng.randint(1, 2**31)})
        return f"{header}.{payload}.{self.chars(URLSAFE, 43)}"

    def stripe(self) -> str:
        return f"{self.rng.choice(['sk', 'rk'])}_live_{self.chars(ALNUM, 24)}"

    def twilio(self) -> str:
        return "SK" + self.chars(HEX, 32)

    def sendgrid(self) -> str:
        return f"SG.{self.chars(URLSAFE, 22)}.{self.chars(URLSAFE, 43)}"

    def openai(self) -> str:
        if self.rng.random() < 0.5:
            return f"sk-{self.chars(ALNUM, 20)}T3BlbkFJ{self.chars(ALNUM, 20)}"
        return f"sk-proj-{self.chars(URLSAFE, 64)}"

    def anthropic(self) -> str:
        return f"sk-ant-api03-{self.chars(URLSAFE, 93)}AA"

    def google(self) -> str:
        return "AIza" + self.chars(URLSAFE, 35)

    def aws_secret(self) -> str:
        return self.chars(B64, 40)

    def aws_id(self) -> str:
        return "AKIA" + self.chars(string.ascii_uppercase + string.digits, 16)

    def github(self) -> str:
        return "ghp_" + self.chars(ALNUM, 36)

    def slack(self) -> str:
        return f"xoxb-{self.chars(string.digits, 12)}-{self.chars(ALNUM, 24)}"

    def hex(self, n: int) -> str:
        return self.chars(HEX, n)

    def token(self) -> str:
        return self.chars(ALNUM, 40)

    def password(self) -> str:
        return self.chars(ALNUM, 10) + self.rng.choice("!@#%^*") + self.chars(string.digits, 2)

    def pem(self) -> str:
        body = "\n".join(self.chars(B64, 64) for _ in range(4))
        return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def b64(self, n: int) -> str:
        return self.chars(B64, n)


# Issue 28's forms together, as pasted into a stashed error or a runbook: the values that
# must not come back from the stash or the knowledge base.
ISSUE_28_SECRETS = {"azure": "Q2x9pw7Hq2x9pw7Hq2x9pw7Hq2x9pw7Hq2x9pw7+/Zm9vYmFy==",
                    "redis": "rEd1sPw7Hq2x9", "curl": "cUrlPw7Hq2x9", "auth": "tUplePw7Hq2x9"}
ISSUE_28_TRACE = (
    'Traceback (most recent call last):\n  File "sync.py", line 12, in <module>\n'
    f'    resp = requests.post(URL, auth=("bot", "{ISSUE_28_SECRETS["auth"]}"))\n'
    "requests.exceptions.ConnectionError: storage DefaultEndpointsProtocol=https;"
    f"AccountName=logs;AccountKey={ISSUE_28_SECRETS['azure']};EndpointSuffix=core.windows.net\n"
    f"cache at redis://:{ISSUE_28_SECRETS['redis']}@cache:6379/0 refused; retried with\n"
    f"$ curl -u deploy:{ISSUE_28_SECRETS['curl']} https://ci.example.com/hooks\n")


# Templates: (file suffix, kind, template). ``{v}`` is the planted value; every template is
# one place a secret (or a look-alike) is found in real projects.
SECRET_TEMPLATES: tuple[tuple[str, str, str], ...] = (
    (".py", "password", 'DB_PASSWORD = "{v}"'),
    (".py", "openai", 'client = OpenAI(api_key="{v}")'),
    (".py", "jwt", 'SERVICE_JWT = "{v}"'),
    (".py", "token", 'headers = {{"Authorization": "Bearer {v}"}}'),
    (".py", "hex64", 'signature = hmac.new(bytes.fromhex("{v}"), body, hashlib.sha256)'),
    (".py", "hex64", 'signer = make_signer(signing_key="{v}")'),
    (".py", "token", "CONFIG = {{'client_secret': '{v}', 'timeout': 30}}"),
    (".py", "anthropic", 'anthropic.Anthropic(api_key="{v}")'),
    (".js", "stripe", "const stripe = require('stripe')('{v}');"),
    (".js", "stripe", 'module.exports = {{ stripeKey: "{v}", currency: "eur" }};'),
    (".js", "jwt", 'const config = {{ "jwt": "{v}" }};'),
    (".js", "sendgrid", "sgMail.setApiKey('{v}');"),
    (".ts", "token", "export const apiKey: string = '{v}';"),
    (".ts", "token", 'private readonly signingSecret = "{v}";'),
    (".ts", "google", 'const firebaseConfig = {{ apiKey: "{v}", projectId: "demo" }};'),
    (".go", "token", 'const apiToken = "{v}"'),
    (".go", "aws_secret", 'os.Setenv("AWS_SECRET_ACCESS_KEY", "{v}")'),
    (".go", "twilio", 'client := twilio.NewRestClientWithParams(twilio.ClientParams{{Username: '
                      '"{v}"}})'),
    (".java", "token", 'private static final String API_KEY = "{v}";'),
    (".java", "token", 'conn.setRequestProperty("Authorization", "Bearer {v}");'),
    (".java", "password", 'props.put("mail.smtp.password", "{v}");'),
    (".sh", "github", "export GITHUB_TOKEN={v}"),
    (".sh", "token", 'curl -s -H "Authorization: Bearer {v}" https://api.example.com/v1/me'),
    (".sh", "slack", 'curl -X POST -H "Authorization: Bearer {v}" https://slack.com/api/chat'),
    (".yaml", "google", "api_key: {v}"),
    (".yaml", "password", "  password: {v}"),
    (".yaml", "token", '    auth_token: "{v}"'),
    (".yaml", "aws_secret", "  aws_secret_access_key: {v}"),
    (".json", "jwt", '  "jwt": "{v}",'),
    (".json", "hex40", '  "private_key_id": "{v}",'),
    (".json", "stripe", '  "stripeKey": "{v}",'),
    (".toml", "password", 'password = "{v}"'),
    (".toml", "token", 'api_token = "{v}"'),
    (".ini", "token", "client_secret = {v}"),
    (".ini", "password", "password={v}"),
    (".properties", "password", "spring.datasource.password={v}"),
    (".rb", "hex128", 'config.secret_key_base = "{v}"'),
    (".php", "password", "    'password' => '{v}',"),
    (".xml", "token", '<add key="ApiKey" value="{v}" />'),
    (".md", "stripe", "For local tests we used the live key {v} by mistake."),
    (".md", "token", 'curl -H "Authorization: Bearer {v}" https://api.example.com/v2/orders'),
    (".md", "aws_secret", "| AWS_SECRET_ACCESS_KEY | {v} |"),
    (".md", "google", "```yaml\nmaps:\n  api_key: {v}\n```"),
    (".md", "password", "```bash\nDB_PASSWORD={v}\n```"),
    (".md", "jwt", "Send `Authorization: Bearer {v}` with every request."),
    (".md", "anthropic", "export ANTHROPIC_API_KEY={v}"),
    (".env.example", "stripe", "STRIPE_SECRET_KEY={v}"),
    (".env.example", "sendgrid", "SENDGRID_API_KEY={v}"),
    (".env.example", "password", "POSTGRES_PASSWORD={v}"),
    (".env.example", "aws_id", "AWS_ACCESS_KEY_ID={v}"),
    # Issue 28's forms: an Azure connection string's key, a URL password with an empty user,
    # curl's -u and a requests-style auth tuple (in code and in a pasted traceback).
    (".py", "azure", 'conn_str = "DefaultEndpointsProtocol=https;AccountName=prodlogs;'
                     'AccountKey={v};EndpointSuffix=core.windows.net"'),
    (".json", "azure", '  "AzureWebJobsStorage": "DefaultEndpointsProtocol=https;'
                       'AccountName=fnstore;AccountKey={v}",'),
    (".cs", "azure", 'var bus = "Endpoint=sb://orders.servicebus.windows.net/;'
                     'SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={v}";'),
    (".py", "urlpass", 'REDIS_URL = "redis://:{v}@cache.internal:6379/0"'),
    (".yaml", "urlpass", "  broker_url: redis://:{v}@redis:6379/0"),
    (".sh", "password", "curl -sf -u deploy:{v} https://ci.example.com/api/builds"),
    (".md", "password", "    $ curl --user admin:{v} https://nexus.example.com/service/rest"),
    (".py", "password", 'session.auth = ("svc-reporting", "{v}")'),
    (".md", "password", 'File "sync.py", line 12, in <module>\n'
                        '    resp = requests.post(URL, auth=("bot", "{v}"))'),
    # Issue 40's forms: passwords on command lines and in environment variables ...
    (".sh", "password", "PGPASSWORD={v} psql -h db.internal -U app -d shop"),
    (".md", "password", "    $ MYSQL_PWD={v} mysql -h 127.0.0.1 -u root shop"),
    (".sh", "password", "mysqldump -uroot -p{v} shop > shop.sql"),
    (".sh", "password", "docker login -u deploy -p {v} registry.example.com"),
    (".sh", "password", "wget --http-user=ci --http-password={v} https://files.example.com/x"),
    (".md", "password", "    curl -udeploy:{v} https://nexus.example.com/repository/raw/"),
    (".yml", "password", "      run: ./deploy --api-token={v} --region eu-west-1"),
    # ... in JDBC query strings, Maven, .NET and Ansible settings ...
    (".properties", "password", "spring.datasource.url=jdbc:mysql://db:3306/shop?user=shop"
                                "&password={v}&useSSL=false"),
    (".java", "password", 'String url = "jdbc:postgresql://db/shop?user=app&password={v}";'),
    (".xml", "password", "      <password>{v}</password>"),
    (".config", "password", '    <add key="DbPassword" value="{v}" />'),
    (".yml", "password", "ansible_become_pass: {v}"),
    (".ini", "password", "web1 ansible_host=10.0.0.5 ansible_password={v} ansible_user=root"),
    # ... chat webhooks and Vault tokens ...
    (".py", "slackhook", 'SLACK_URL = "https://hooks.slack.com/services/{v}"'),
    (".js", "discordhook", "const hook = 'https://discord.com/api/webhooks/{v}';"),
    (".yml", "teamshook", "teams_url: https://contoso.webhook.office.com/webhookb2/{v}"),
    (".sh", "vault", "vault login {v}"),
    (".md", "vault", "    $ export VAULT_ADDR=https://vault:8200 && vault login {v}"),
)

LOOKALIKE_TEMPLATES: tuple[tuple[str, str, str], ...] = (
    ("package-lock.json", "sha512", '      "integrity": "sha512-{v}",'),
    ("yarn.lock", "sha512", "  integrity sha512-{v}"),
    ("poetry.lock", "sha256", '    {{file = "tokenizers-0.15.0-cp311-manylinux.whl", '
                              'hash = "sha256:{v}"}},'),
    ("requirements.txt", "sha256", "keyring==24.3.0 --hash=sha256:{v}"),
    ("go.sum", "gosum", "github.com/golang-jwt/jwt/v5 v5.2.0 h1:{v}="),
    ("Dockerfile", "sha256", "FROM python:3.11-slim@sha256:{v}"),
    (".py", "uuid", 'REQUEST_ID = "{v}"'),
    (".py", "uuid", 'idempotency_key = "{v}"'),
    (".json", "uuid", '  "tenantId": "{v}",'),
    (".md", "gitsha", "Fixed in commit {v} (token refresh)."),
    (".toml", "gitsha", 'rev = "{v}"'),
    (".json", "gitsha", '  "sha": "{v}",'),
    (".md", "image", '<img alt="key icon" src="data:image/png;base64,{v}">'),
    (".css", "image", ".token-icon {{ background: url(data:image/png;base64,{v}); }}"),
    (".py", "dummy", 'token = "dummy-token"'),
    (".py", "dummy", 'TEST_API_KEY = "test"'),
    (".py", "dummy", 'fake_token = "fake"'),
    (".py", "dummy", 'api_key = "your-api-key-here"'),
    (".yaml", "dummy", "password: <password>"),
    (".yaml", "dummy", "secret: ${{SECRET}}"),
    (".yaml", "dummy", 'token: "{{{{ token }}}}"'),
    (".json", "dummy", '  "password": "changeme",'),
    (".ts", "dummy", "const token = process.env.API_TOKEN;"),
    (".css", "color", "  color: #{v};"),
    (".py", "word", 'max_tokens = "{v}"'),
    (".py", "word", 'cache_key = "user:{v}"'),
    (".md", "word", "Press the {v} key to open the token settings."),
    (".java", "identifier", "String {v} = tokenService.getTokenFromRequestHeaders(request);"),
    (".sh", "sshpub", 'echo "ssh-ed25519 {v} deploy@ci" >> ~/.ssh/authorized_keys'),
    (".html", "uuid", '<li data-key="{v}">Rotate token</li>'),
    (".py", "etag", 'etag = "{v}"'),
    (".md", "version", "Upgrade to tokenizers {v} for faster key lookups."),
    (".ts", "identifier", "const {v} = new SecretManagerServiceClient();"),
    (".toml", "word", 'keywords = ["auth", "jwt", "{v}"]'),
    (".css", "color", "  --key-color: #{v};"),
    # Issue 28's false positives, from real code.
    (".yml", "dummy", "permissions:\n  id-token: write\n  contents: read"),
    (".py", "dummy", "quote, token = \"'\", token[0][1:-1]"),
    (".py", "dummy", "credentials = '{{0}}:{{1}}'.format(user, password)"),
    (".py", "dummy", 'assert urlsplit("http://u:p@host/path").password == "p"'),
    (".py", "dummy", 'PROXY = "http://a:b@proxy.test:3128"'),
    (".sh", "dummy", "docker run --rm -u 1000:1000 -v $PWD:/src builder"),
    (".sh", "dummy", 'curl -u "$CI_USER:$CI_TOKEN" https://ci.example.com/api'),
    # Issue 40's false positives: password hashes, digest challenges, workflow secrets,
    # expressions, versions, generated constraint names, usage texts.
    (".py", "argon2", 'hashed_password = "$argon2id$v=19$m=65536,t=3,p=4${v}"'),
    (".json", "bcrypt", '  "hashed_password": "$2b$12${v}",'),
    (".json", "djangohash", '    "password": "pbkdf2_sha256$600000${v}",'),
    (".md", "digest", 'Authorization: Digest username="Mufasa", realm="x@host.com", '
                      'nonce="{v}", uri="/dir/index.html", qop=auth'),
    (".yml", "dummy", "          password: ${{{{ secrets.PYPI_PASSWORD }}}}"),
    (".yml", "dummy", "      - run: echo ${{{{ secrets.TOKEN }}}} | docker login -u bot "
                      "--password-stdin"),
    (".md", "dummy", "    contextvar_token = _request_ctx.set(request)"),
    ("pnpm-lock.yaml", "version", "  registry-auth-token: {v}"),
    (".ts", "constraint", 'CONSTRAINT "PK_{v}" PRIMARY KEY ("id")'),
    (".md", "dummy", "usage: deploy [--password PASSWORD] [--token TOKEN]"),
    (".md", "dummy", "Pass the --token option, or set the password in the config."),
    (".ts", "dummy", "fetch(url, {{ credentials: 'same-origin' }})"),
    (".md", "dummy", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"),
)


def _value(values: _Values, kind: str) -> str:
    """A fresh value of ``kind`` (secrets and look-alikes)."""
    generators = {
        "hex64": lambda: values.hex(64), "hex40": lambda: values.hex(40),
        "hex128": lambda: values.hex(128), "sha512": lambda: values.b64(86) + "==",
        "sha256": lambda: values.hex(64), "gosum": lambda: values.b64(43),
        "gitsha": lambda: values.hex(40), "image": lambda: values.b64(160),
        "dummy": lambda: "", "color": lambda: values.hex(6),
        "word": lambda: str(values.rng.choice([256, 1024, 4096])) if values.rng.random() < 0.5
        else values.rng.choice(["Tab", "Enter", "Escape", "profile", "42"]),
        "identifier": lambda: values.rng.choice(["bearerToken", "authHeader", "sessionKey"])
        + str(values.rng.randint(1, 9)),
        "sshpub": lambda: "AAAAC3NzaC1lZDI1NTE5AAAAI" + values.b64(43),
        "etag": lambda: values.hex(32),
        "azure": lambda: values.b64(86) + "==", "urlpass": lambda: values.chars(ALNUM, 20),
        "version": lambda: f"{values.rng.randint(1, 9)}.{values.rng.randint(0, 30)}."
                           f"{values.rng.randint(0, 9)}",
        "argon2": lambda: values.b64(22) + "$" + values.b64(43),
        "bcrypt": lambda: values.chars(ALNUM + "./", 53),
        "djangohash": lambda: values.chars(ALNUM, 22) + "$" + values.b64(43) + "=",
        "digest": lambda: values.hex(32), "constraint": lambda: values.hex(27),
        "slackhook": lambda: f"T{values.chars(string.ascii_uppercase + string.digits, 8)}/"
                             f"B{values.chars(string.ascii_uppercase + string.digits, 8)}/"
                             f"{values.chars(ALNUM, 24)}",
        "discordhook": lambda: f"{values.chars(string.digits, 18)}/{values.chars(URLSAFE, 68)}",
        "teamshook": lambda: f"{values.uuid()}@{values.uuid()}/IncomingWebhook/"
                             f"{values.hex(32)}/{values.uuid()}",
        "vault": lambda: ("hvs." + values.chars(URLSAFE, 90)) if values.rng.random() < 0.5
        else "s." + values.chars(ALNUM, 24),
    }
    return generators.get(kind, getattr(values, kind, None) or values.token)()


def generate(seed: int = 12, rounds: int = 3) -> Corpus:
    """The corpus: every template ``rounds`` times with fresh values, one file per suffix and
    round (``settings_1.py``, ``notes_2.md``, ...), plus PEM keys inside code and docs."""
    rng = random.Random(seed)
    values = _Values(rng)
    corpus = Corpus()
    lines: dict[str, list[str]] = {}

    def place(templates, planted: list[Planted], round_no: int, is_secret: bool) -> None:
        for suffix, kind, template in templates:
            path = _file_name(suffix, round_no)
            value = _value(values, kind)
            text = template.format(v=value)
            lines.setdefault(path, []).append(text)
            # A secret must vanish; a look-alike's whole line must stay as it was.
            planted.append(Planted(kind, value if is_secret else text.strip(), path))

    for round_no in range(1, rounds + 1):
        place(SECRET_TEMPLATES, corpus.secrets, round_no, True)
        place(LOOKALIKE_TEMPLATES, corpus.lookalikes, round_no, False)
        for path in (_file_name(".py", round_no), _file_name(".md", round_no)):
            pem = values.pem()
            lines.setdefault(path, []).append(f'PRIVATE_KEY = """{pem}"""' if path.endswith(
                ".py") else f"```\n{pem}\n```")
            corpus.secrets.append(Planted("pem", pem.splitlines()[2], path))
        # A key pasted into a notebook cell (issue 40), and one written on a single line
        # with ``\n`` escapes.
        pem = values.pem()
        cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
                "source": [f"{line}\n" for line in f'KEY = """{pem}"""'.splitlines()]}
        path = _file_name(".ipynb", round_no)
        corpus.files[path] = json.dumps({"cells": [cell], "nbformat": 4}, indent=1) + "\n"
        corpus.secrets.append(Planted("pem-notebook", pem.splitlines()[2], path))
        pem = values.pem()
        lines.setdefault(_file_name(".js", round_no), []).append(
            "const key = " + json.dumps(pem + "\n") + ";")
        corpus.secrets.append(Planted("pem-one-line", pem.splitlines()[2],
                                      _file_name(".js", round_no)))
    for path, body in lines.items():
        corpus.files[path] = "\n\n".join(body) + "\n"
    return corpus


def _file_name(suffix: str, round_no: int) -> str:
    """A file per suffix and round; full names (lockfiles) get a directory per round."""
    if not suffix.startswith("."):
        return f"round{round_no}/{suffix}"
    if suffix == ".env.example":
        return f"round{round_no}/.env.example"
    return f"round{round_no}/sample{suffix}"
