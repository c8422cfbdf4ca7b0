"""Write fixtures/secrets/labelled.jsonl: the labelled set redaction is measured on.

Every secret in it is FAKE: random characters drawn from a seeded generator in
the shape of each provider's credential (its prefix, length, alphabet and, where
the format has one, its checksum, as GitHub's and npm's CRC32 tail), so that a
detector that checks the shape sees a realistic key and nothing here opens
anything. The shapes were read from the public rule sets and test data of secret
scanners (gitleaks' rules and their tests, detect-secrets' plugins and test data,
TruffleHog's detectors); no file of theirs is copied.

Each line is one case, `{"id", "text", "secrets": [{"kind", "value"}]}`: the
text a transcript record could hold (a `.env` file an agent printed, a shell
export, a JSON or YAML config, code, a curl command, an error message, a prompt
with a pasted key) and every secret in it with its kind. Cases whose `secrets`
is empty are the look-alikes a redactor must leave alone: hashes, git shas,
UUIDs, base64 images, message and tool-call ids, integrity sums, public keys and
certificates, placeholders, variables, and the documented example keys (AWS's
`...EXAMPLE`), which are published and open nothing.

    .venv/bin/python scripts/make_secrets_fixture.py    # rewrites the file

tests/core/test_redact.py checks the file is what this script writes.
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "secrets" / "labelled.jsonl"
SEED = 20260

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"
URLSAFE = string.ascii_letters + string.digits + "-_"
BASE62 = string.digits + string.ascii_letters  # GitHub's and npm's checksum alphabet


class Fakes:
    """Fake credentials in each provider's shape, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.rnd.choice(alphabet) for _ in range(n))

    def crc_tail(self, body: str) -> str:
        """The 6-character base62 CRC32 of `body`, as GitHub and npm tokens end."""
        n = zlib.crc32(body.encode())
        out = ""
        while n:
            n, r = divmod(n, 62)
            out = BASE62[r] + out
        return out.rjust(6, "0")

    def aws_key(self) -> str:
        return self.rnd.choice(["AKIA", "ASIA"]) + self.chars(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16
        )

    def aws_secret(self) -> str:
        return self.chars(B64, 40)

    def github_token(self) -> str:
        kind = self.rnd.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"])
        body = self.chars(ALNUM, 30)
        return kind + body + self.crc_tail(kind + body)

    def github_pat(self) -> str:
        return "github_pat_" + self.chars(ALNUM, 22) + "_" + self.chars(ALNUM, 59)

    def gitlab_token(self) -> str:
        return "glpat-" + self.chars(URLSAFE.replace("-", ""), 20)

    def openai_key(self) -> str:
        if self.rnd.random() < 0.3:
            return "sk-" + self.chars(ALNUM, 20) + "T3BlbkFJ" + self.chars(ALNUM, 20)
        kind = self.rnd.choice(["proj", "proj", "svcacct", "admin"])
        return f"sk-{kind}-" + self.chars(URLSAFE, 74) + "T3BlbkFJ" + self.chars(URLSAFE, 74)

    def anthropic_key(self) -> str:
        return "sk-ant-api03-" + self.chars(URLSAFE, 93) + "AA"

    def slack_token(self) -> str:
        kind = self.rnd.choice(["xoxb", "xoxp"])
        digits = string.digits
        if kind == "xoxb":
            return f"xoxb-{self.chars(digits, 12)}-{self.chars(digits, 13)}-{self.chars(ALNUM, 24)}"
        return (
            f"xoxp-{self.chars(digits, 12)}-{self.chars(digits, 12)}-{self.chars(digits, 13)}-"
            + self.chars(HEX, 32)
        )

    def slack_webhook(self) -> str:
        upper = string.ascii_uppercase + string.digits
        return (
            "https://hooks.slack.com/services/T"
            + self.chars(upper, 8)
            + "/B"
            + self.chars(upper, 10)
            + "/"
            + self.chars(ALNUM, 24)
        )

    def stripe_key(self) -> str:
        return self.rnd.choice(["sk_live_", "rk_live_"]) + self.chars(
            ALNUM, 99 if self.rnd.random() < 0.5 else 24
        )

    def google_api_key(self) -> str:
        return "AIza" + self.chars(URLSAFE, 35)

    def huggingface_token(self) -> str:
        return "hf_" + self.chars(string.ascii_letters, 34)

    def npm_token(self) -> str:
        body = self.chars(ALNUM, 30)
        return "npm_" + body + self.crc_tail(body)

    def pypi_token(self) -> str:
        return "pypi-AgEIcHlwaS5vcmc" + self.chars(URLSAFE, 150)

    def sendgrid_key(self) -> str:
        return "SG." + self.chars(URLSAFE, 22) + "." + self.chars(URLSAFE, 43)

    def twilio_key(self) -> str:
        return "SK" + self.chars(HEX, 32)

    def jwt(self) -> str:
        def part(obj: dict[str, object]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        header = part({"alg": "HS256", "typ": "JWT"})
        claims = part(
            {
                "sub": str(self.rnd.randrange(10**9)),
                "name": self.rnd.choice(["ana", "build-bot", "svc-deploy"]),
                "iat": 1767225600 + self.rnd.randrange(10**7),
            }
        )
        return f"{header}.{claims}.{self.chars(URLSAFE, 43)}"

    def private_key(self) -> str:
        kind = self.rnd.choice(
            ["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"]
        )
        first = {
            "RSA PRIVATE KEY": "MIIEpAIBAAKCAQEA",
            "PRIVATE KEY": "MIIEvgIBADANBgkqhkiG9w0BAQEFAASC",
            "OPENSSH PRIVATE KEY": "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAA"
            "AAtzc2gtZW",
            "EC PRIVATE KEY": "MHcCAQEEI",
        }[kind]
        body = first + self.chars(B64, 64 * self.rnd.randint(3, 6) - len(first))
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        return "\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"])

    def password(self) -> str:
        words = ["correct", "horse", "battery", "staple", "Winter", "Summer", "tiger", "maple"]
        if self.rnd.random() < 0.5:
            return (
                self.rnd.choice(words) + str(self.rnd.randrange(10, 9999)) + self.rnd.choice("!#$%")
            )
        return self.chars(ALNUM + "!#%^*", self.rnd.randint(12, 24))

    def entropy_secret(self) -> str:
        return self.chars(
            self.rnd.choice([ALNUM, HEX, B64, URLSAFE]), self.rnd.choice([32, 40, 48, 64])
        )

    def azure_storage_key(self) -> str:
        return self.chars(B64, 86) + "=="

    def digitalocean_token(self) -> str:
        return "dop_v1_" + self.chars(HEX, 64)

    def groq_key(self) -> str:
        return "gsk_" + self.chars(ALNUM, 52)

    def telegram_token(self) -> str:
        return f"{self.rnd.randrange(10**8, 10**10)}:AA" + self.chars(URLSAFE, 33)

    def shopify_token(self) -> str:
        return "shpat_" + self.chars(HEX, 32)

    # ---------------------------------------------------------------- look-alikes

    def sha256(self) -> str:
        return self.chars(HEX, 64)

    def git_sha(self) -> str:
        return self.chars(HEX, 40)

    def uuid(self) -> str:
        h = self.chars(HEX, 32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{self.rnd.choice('89ab')}{h[17:20]}-{h[20:]}"

    def anthropic_id(self, prefix: str) -> str:
        return prefix + "01" + self.chars(ALNUM, 22)


# Contexts a transcript record holds a credential in: {v} is the secret, {n} an
# environment variable name of its provider.
CONTEXTS = [
    "{n}={v}",
    "export {n}={v}",
    '{n}="{v}"',
    '{{"{n_lower}": "{v}"}}',
    "  {n_lower}: {v}",
    '$ curl -s https://api.example.com/v1/me -H "Authorization: Bearer {v}"',
    "Here is my key, why do I get a 401? {v}",
    "Error: token {v} was rejected by the server (HTTP 401)",
    'client = Client(api_key="{v}")',
    "{v}",
]


def positives(f: Fakes) -> list[tuple[str, str, str, Callable[[], str]]]:
    """(kind, variable name, contexts, generator) of each provider kind."""
    return [
        ("aws-key", "AWS_ACCESS_KEY_ID", "all", f.aws_key),
        ("github-token", "GITHUB_TOKEN", "all", f.github_token),
        ("github-token", "GH_TOKEN", "some", f.github_pat),
        ("gitlab-token", "GITLAB_TOKEN", "all", f.gitlab_token),
        ("openai-key", "OPENAI_API_KEY", "all", f.openai_key),
        ("anthropic-key", "ANTHROPIC_API_KEY", "all", f.anthropic_key),
        ("slack-token", "SLACK_BOT_TOKEN", "all", f.slack_token),
        ("stripe-key", "STRIPE_SECRET_KEY", "all", f.stripe_key),
        ("google-api-key", "GOOGLE_API_KEY", "all", f.google_api_key),
        ("huggingface-token", "HF_TOKEN", "all", f.huggingface_token),
        ("npm-token", "NPM_TOKEN", "all", f.npm_token),
        ("pypi-token", "TWINE_PASSWORD", "all", f.pypi_token),
        ("sendgrid-key", "SENDGRID_API_KEY", "all", f.sendgrid_key),
        ("twilio-key", "TWILIO_API_KEY", "some", f.twilio_key),
        ("jwt", "AUTH_TOKEN", "all", f.jwt),
        ("digitalocean-token", "DIGITALOCEAN_TOKEN", "some", f.digitalocean_token),
        ("groq-key", "GROQ_API_KEY", "some", f.groq_key),
        ("shopify-token", "SHOPIFY_ACCESS_TOKEN", "some", f.shopify_token),
    ]


def provider_cases(f: Fakes) -> list[dict[str, object]]:
    cases: list[dict[str, object]] = []
    for kind, name, which, make in positives(f):
        contexts = CONTEXTS if which == "all" else CONTEXTS[::3]
        for i, context in enumerate(contexts):
            v = make()
            text = context.format(v=v, n=name, n_lower=name.lower())
            cases.append(case(f"{kind}-{name.lower()}-{i}", text, [(kind, v)]))
    return cases


def special_cases(f: Fakes) -> list[dict[str, object]]:
    """Credentials whose kind is their context: pairs, blocks, URLs, assignments."""
    cases = []
    for i in range(6):
        key, secret = f.aws_key(), f.aws_secret()
        text = [
            f"[default]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n",
            f"export AWS_ACCESS_KEY_ID={key}\nexport AWS_SECRET_ACCESS_KEY={secret}",
            f'{{"AccessKeyId": "{key}", "SecretAccessKey": "{secret}",'
            ' "Expiration": "2026-05-01T12:00:00Z"}',
            f"AWS_SECRET_ACCESS_KEY={secret}",
            f'session = boto3.Session(aws_access_key_id="{key}", aws_secret_access_key="{secret}")',
            f"aws_secret_access_key: {secret}",
        ][i]
        found = [("aws-secret", secret)] + ([("aws-key", key)] if key in text else [])
        cases.append(case(f"aws-pair-{i}", text, found))
    for i in range(8):
        pem = f.private_key()
        text = [
            f"$ cat ~/.ssh/id_ed25519\n{pem}",
            pem,
            # a service account file read by the agent, as JSON shows it: \n escaped
            json.dumps(
                {
                    "type": "service_account",
                    "project_id": "demo-project-4411",
                    "private_key_id": f.git_sha(),
                    "private_key": pem + "\n",
                    "client_email": "deployer@demo-project-4411.iam.gserviceaccount.com",
                },
                indent=2,
            ),
            f"Please fix the TLS setup, this is the key we use:\n\n```\n{pem}\n```",
            "tls.key: |\n  " + pem.replace("\n", "\n  "),
            f"KEY = '''{pem}'''",
            f'PRIVATE_KEY="{pem}"',
            f"{pem}\n-----BEGIN CERTIFICATE-----\nMIIC{f.chars(B64, 60)}"
            "\n-----END CERTIFICATE-----",
        ][i]
        if i == 2:  # the secret as it is written: the escaped form
            value = json.dumps(pem)[1:-1]
        elif i == 4:  # indented under its YAML key
            value = pem.replace("\n", "\n  ")
        else:
            value = pem
        cases.append(case(f"private-key-{i}", text, [("private-key", value)]))
    for i in range(8):
        pw = f.password()
        user = f.rnd.choice(["admin", "postgres", "deploy", "ana"])
        text = [
            f"DATABASE_URL=postgres://{user}:{pw}@db.internal:5432/app",
            f"mongodb+srv://{user}:{pw}@cluster0.abcd1.mongodb.net/test?retryWrites=true",
            f"$ git remote -v\norigin\thttps://{user}:{pw}@git.example.com/team/app.git (fetch)",
            f"redis://:{pw}@cache.example.com:6379/0",
            f'engine = create_engine("mysql+pymysql://{user}:{pw}@10.0.0.5/orders")',
            f"amqp://{user}:{pw}@rabbit:5672/",
            f"Cloning into 'app'...\nfatal: could not read from https://{user}:{pw}@example.org/app.git",
            f"pip install --index-url https://{user}:{pw}@pypi.internal.example.com/simple/ pkg",
        ][i]
        cases.append(case(f"url-password-{i}", text, [("url-password", pw)]))
    names = [
        "DB_PASSWORD",
        "POSTGRES_PASSWORD",
        "SECRET_KEY",
        "JWT_SECRET",
        "SESSION_SECRET",
        "API_TOKEN",
        "SMTP_PASSWORD",
        "REDIS_PASSWORD",
        "ENCRYPTION_KEY",
        "CLIENT_SECRET",
        "MYSQL_ROOT_PASSWORD",
        "ADMIN_PASSWORD",
    ]
    for i, name in enumerate(names):
        v = f.password() if "PASSWORD" in name else f.entropy_secret()
        form = i % 4
        text = [
            f"{name}={v}",
            f'{name}="{v}"',
            f"export {name}='{v}'",
            f"# .env\nDEBUG=false\n{name}={v}\nLOG_LEVEL=info",
        ][form]
        cases.append(case(f"env-secret-{i}", text, [("env-secret", v)]))
    for i in range(10):
        v = f.entropy_secret()
        name = f.rnd.choice(
            ["secret", "api_key", "token", "auth_token", "signing_key", "webhook_secret", "apiKey"]
        )
        text = [
            f'{name} = "{v}"',
            f'  "{name}": "{v}",',
            f"{name}: {v}",
            f"settings.{name} = '{v}'",
            f'const {name} = "{v}";',
        ][i % 5]
        cases.append(case(f"high-entropy-{i}", text, [("high-entropy", v)]))
    for i in range(4):
        hook = f.slack_webhook()
        text = [
            f"SLACK_WEBHOOK_URL={hook}",
            "curl -X POST -H 'Content-type: application/json'"
            f' --data \'{{"text":"deployed"}}\' {hook}',
            f'webhook: "{hook}"',
            hook,
        ][i]
        cases.append(case(f"slack-webhook-{i}", text, [("slack-webhook", hook)]))
    for i in range(3):
        k = f.azure_storage_key()
        text = (
            "DefaultEndpointsProtocol=https;AccountName=demostore01;"
            f"AccountKey={k};EndpointSuffix=core.windows.net"
        )
        cases.append(case(f"azure-storage-key-{i}", text, [("azure-storage-key", k)]))
    for i in range(3):
        t = f.telegram_token()
        text = [
            f"TELEGRAM_BOT_TOKEN={t}",
            f"bot = telebot.TeleBot('{t}')",
            f"https://api.telegram.org/bot{t}/getMe",
        ][i]
        cases.append(case(f"telegram-token-{i}", text, [("telegram-token", t)]))
    return cases


def held_out(f: Fakes) -> list[dict[str, object]]:
    """Contexts written after grumem's patterns were, to measure them on text they
    were not tuned to (ids `held-out-*`)."""
    cases = []

    def add(text: str, *secrets: tuple[str, str]) -> None:
        cases.append(case(f"held-out-{len(cases)}", text, list(secrets)))

    pw, tok = f.password(), f.entropy_secret()
    add(f"services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD={pw}", ("env-secret", pw))
    add(f"ENV API_TOKEN={tok}", ("env-secret", tok))
    secret_b64 = base64.b64encode(f.password().encode()).decode()
    add(
        "$ kubectl get secret db -o yaml\napiVersion: v1\n"
        f"data:\n  password: {secret_b64}\nkind: Secret",
        ("k8s-secret", secret_b64),
    )
    gh = f.github_token()
    gh_b64 = base64.b64encode(gh.encode()).decode()
    add(f"data:\n  token: {gh_b64}", ("github-token", gh_b64))
    pw = f.password()
    add(f"kubectl create secret generic db --from-literal=password='{pw}'", ("password", pw))
    npm = f.npm_token()
    add(f"$ cat ~/.npmrc\n//registry.npmjs.org/:_authToken={npm}", ("npm-token", npm))
    pypi = f.pypi_token()
    add(f"[pypi]\nusername = __token__\npassword = {pypi}", ("pypi-token", pypi))
    tok = f.entropy_secret()
    add(f"machine api.heroku.com\n  login ana@example.com\n  password {tok}", ("password", tok))
    pw = f.password()
    add(f"$ curl -u admin:{pw} https://jenkins.internal/api/json", ("password", pw))
    pw = f.password()
    add(f"$ mysql -u root -p'{pw}' orders", ("password", pw))
    basic = base64.b64encode(f"ana:{f.password()}".encode()).decode()
    add(f"> GET /api/v1/items HTTP/1.1\n> Authorization: Basic {basic}", ("auth-header", basic))
    tok = f.entropy_secret()
    add(f'r = requests.get(url, headers={{"X-API-Key": "{tok}"}})', ("api-key", tok))
    pw = f.password()
    add(
        f"$ echo '{pw}' | docker login -u ana --password-stdin registry.example.com"
        "\nLogin Succeeded",
        ("password", pw),
    )
    pw = f.password()
    add(f"$ PGPASSWORD={pw} psql -h db -U app", ("env-secret", pw))
    pw = f.password()
    add(f'{{"username": "ana", "password": "{pw}"}}', ("password", pw))
    pw = f.password()
    add(f"  password: {pw}", ("password", pw))
    key = f.openai_key()
    add(f"I set it like this: openai.api_key = '{key}' but it still fails", ("openai-key", key))
    key = f.anthropic_key()
    add(f"ANTHROPIC_API_KEY={key} claude -p 'hello'", ("anthropic-key", key))
    tok = f.entropy_secret()
    add(f"?access_token={tok}&expires_in=3600", ("access-token", tok))
    tok = f.entropy_secret()
    add(f"https://api.example.com/v2/report?api_key={tok}&format=json", ("api-key", tok))
    hook = f.slack_webhook()
    add(f"Posting to {hook} failed: 404 no_service", ("slack-webhook", hook))
    body = f.private_key().split("\n", 1)[1].rsplit("\n", 1)[0]
    pem = f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{body}\n-----END ENCRYPTED PRIVATE KEY-----"
    add(pem, ("private-key", pem))
    key = f.aws_key()
    add(f"arn:aws:iam::123456789012:user/ci uses {key}", ("aws-key", key))
    tok = f.jwt()
    add(f"Set-Cookie: session={tok}; Path=/; HttpOnly", ("jwt", tok))
    tok = f.entropy_secret()
    add(f"client_secret={tok}", ("client-secret", tok))
    tok = f.entropy_secret()
    add(f"webhookSecret: '{tok}'", ("high-entropy", tok))
    return cases


def second_held_out(f: Fakes) -> list[dict[str, object]]:
    """Written after the patterns were revised on `held-out-*`, and measured without
    revising them again (ids `fresh-*`): the figure that says how they generalise."""
    cases = []

    def add(text: str, *secrets: tuple[str, str]) -> None:
        cases.append(case(f"fresh-{len(cases)}", text, list(secrets)))

    pw = f.password()
    add(f"spring.datasource.password={pw}", ("password", pw))
    tok = f.entropy_secret()
    add(f'Config.set("stripeSecret", "{tok}")', ("high-entropy", tok))
    key = f.github_token()
    add(
        f"remote: Invalid username or password.\nfatal: Authentication failed for 'https://{key}@github.com/team/app.git/'",
        ("github-token", key),
    )
    tok = f.entropy_secret()
    add(f"$ heroku config:set SESSION_KEY={tok}", ("env-secret", tok))
    pw = f.password()
    add(f'<add key="DbPassword" value="{pw}" />', ("password", pw))
    tok = f.entropy_secret()
    add(f"[credentials]\napi_secret = {tok}", ("high-entropy", tok))
    key = f.google_api_key()
    add(
        f"https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={key}",
        ("google-api-key", key),
    )
    key = f.stripe_key()
    add(f'stripe.api_key = "{key}"  # TODO move to env', ("stripe-key", key))
    pw = f.password()
    add(f"$ sshpass -p '{pw}' ssh deploy@10.0.0.8", ("password", pw))
    tok = f.entropy_secret()
    add(f"DJANGO_SECRET_KEY='{tok}'", ("env-secret", tok))
    pw = f.password()
    add(f'psql "host=db user=app password={pw} dbname=app"', ("password", pw))
    hf = f.huggingface_token()
    add(f"!huggingface-cli login --token {hf}", ("huggingface-token", hf))
    tok = f.entropy_secret()
    add(f"headers = {{'Authorization': 'Token {tok}'}}", ("auth-header", tok))
    pw = f.password()
    add(f"<password>{pw}</password>", ("password", pw))
    return cases


def look_alikes(f: Fakes) -> list[dict[str, object]]:
    """Text that looks like a secret and is none."""
    png = base64.b64encode(bytes(f.rnd.randrange(256) for _ in range(240))).decode()
    texts = [
        f'checksum = "{f.sha256()}"',
        f"sha256: {f.sha256()}  dist/app-1.4.2.tar.gz",
        f"commit {f.git_sha()}\nAuthor: Ana <ana@example.com>\n\n    fix the parser",
        f"$ git log --oneline\n{f.git_sha()[:7]} fix tests\n{f.git_sha()[:7]} add chunking",
        f"HEAD is now at {f.git_sha()[:12]} bump version",
        f'request_id = "{f.uuid()}"',
        f'{{"id": "{f.uuid()}", "session_id": "{f.uuid()}"}}',
        f'<img src="data:image/png;base64,{png}">',
        f'"image": {{"type": "base64", "media_type": "image/png", "data": "{png}"}}',
        f'{{"type": "tool_use", "id": "{f.anthropic_id("toolu_")}", "name": "Bash"}}',
        f'{{"id": "{f.anthropic_id("msg_")}", "type": "message", "role": "assistant"}}',
        f'"requestId": "{f.anthropic_id("req_")}"',
        f'{{"id": "chatcmpl-{f.chars(ALNUM, 29)}", "object": "chat.completion"}}',
        f'"tool_call_id": "call_{f.chars(ALNUM, 24)}"',
        f'"integrity": "sha512-{f.chars(B64, 86)}=="',
        f"golang.org/x/text v0.14.0 h1:{f.chars(B64, 43)}=",
        f"FROM python:3.11-slim@sha256:{f.sha256()}",
        f"Digest: sha256:{f.sha256()}",
        # the documented example keys of AWS's own docs
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "OPENAI_API_KEY=sk-...",
        "OPENAI_API_KEY=your-api-key-here",
        'api_key = os.environ["OPENAI_API_KEY"]',
        "export GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
        'password = getpass.getpass("Password: ")',
        "DB_PASSWORD=${DB_PASSWORD}",
        "SECRET_KEY=<generate one with openssl rand -hex 32>",
        'token = response.json()["access_token"]',
        "Set ANTHROPIC_API_KEY in your environment before running.",
        "postgres://localhost:5432/app",
        "https://ana@github.com/team/app.git",
        "git clone git@github.com:team/app.git",
        f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{f.chars(B64, 43)} ana@laptop",
        f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ{f.chars(B64, 300)} deploy@ci",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"
        + f.chars(B64, 20)
        + "\n"
        + f.chars(B64, 64)
        + "\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE"
        + f.chars(B64, 44)
        + "\n"
        + f.chars(B64, 64)
        + "\n-----END CERTIFICATE-----",
        f"pk_live_{f.chars(ALNUM, 24)}",
        f"{f.rnd.randrange(10**11, 10**12)}-{f.chars(LOWER_ALNUM, 32)}.apps.googleusercontent.com",
        "arn:aws:iam::123456789012:role/deploy-role",
        f"/home/ana/.cache/pip/wheels/{f.chars(HEX, 2)}/{f.chars(HEX, 2)}/{f.sha256()}",
        f'"content": "{base64.b64encode(b"Hello, this is the README of the project.").decode()}"',
        "The password must be at least 12 characters long.",
        "def test_login(client):\n    client.login(username='alice', password='wrong')\n"
        "    assert client.status == 401",
        f'  File "/usr/lib/python3.11/site-packages/x/{f.chars(LOWER_ALNUM, 12)}.py", line 42',
        f"Successfully built wheel {f.chars(LOWER_ALNUM, 10)}-0.1.0-py3-none-any.whl",
        f'"etag": "W/\\"{f.chars(HEX, 32)}\\""',
        f"Run ID: {f.rnd.randrange(10**10, 10**11)}, artifact {f.chars(HEX, 24)}",
        "The token limit is 32768 and the secret of good chunking is the budget.",
        "SECRET_KEY_NAME=session_key\nTOKEN_TTL=3600\nPASSWORD_MIN_LENGTH=12",
        f"npm notice shasum: {f.git_sha()}",
        f"VITE_BUILD_ID={f.chars(HEX, 8)}",
        f'"signature": "{f.chars(B64, 40)}..."  (truncated in the log)',
        "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "sk-ant-api03-REDACTED",
        "[REDACTED:openai-key:3f9c]",
        f"msgid {f.chars(HEX, 16)}@mail.example.com",
        f"xcode-select: note: {f.chars(LOWER_ALNUM, 20)}",
    ]
    return [case(f"look-alike-{i}", text, []) for i, text in enumerate(texts)]


def case(id_: str, text: str, secrets: list[tuple[str, str]]) -> dict[str, object]:
    for _, value in secrets:
        assert value in text, (id_, value)
    return {"id": id_, "text": text, "secrets": [{"kind": k, "value": v} for k, v in secrets]}


def build() -> list[dict[str, object]]:
    f = Fakes(SEED)
    return provider_cases(f) + special_cases(f) + look_alikes(f) + held_out(f) + second_held_out(f)


def render(cases: list[dict[str, object]]) -> str:
    return "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    cases = build()
    OUT.write_text(render(cases), encoding="utf-8")
    secrets = sum(len(c["secrets"]) for c in cases)  # type: ignore[arg-type]
    print(f"{OUT}: {len(cases)} cases, {secrets} secrets", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
