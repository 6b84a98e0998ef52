"""``python -m gpuscale.policy`` prints the policy pack's directory (what ``gpuscale policy-path`` prints), for
installs without the cli extra: ``pulumi preview --policy-pack "$(python -m gpuscale.policy)"``."""

from gpuscale.policy import pack_dir

print(pack_dir())
