#!/usr/bin/env bash
# Offline PR preview: synth every stack of the PR's head and base under Pulumi mocks, diff them, write one comment.
#
#   pr-preview.sh BASE_DIR HEAD_DIR OUT_DIR
#
# BASE_DIR and HEAD_DIR are checkouts of the PR's base and head; each stack is stacks/Pulumi.<name>.yaml of the head.
# Writes OUT_DIR/comment.md (starts with $COMMENT_MARKER; when a stack broke, its first lines name the broken stacks,
# and each one's section says why), OUT_DIR/synth/{base,head}/<stack>/ and OUT_DIR/diff/<stack>.md. The comment is
# written whole before the script exits, whatever broke. Exit 0 when every head stack synthesized and every diff ran
# (stacks that differ are the point of a preview, not a failure); 1 when a head synth or a diff broke. Safe under
# `bash -e` (GitHub's default); the workflow's step copies the comment out before it passes the exit code on.
#
# Environment: GPUSCALE_HEAD / GPUSCALE_BASE (the gpuscale command of each side; default <dir>/.venv/bin/gpuscale),
# BASE_REF (the base branch name, for the heading), RUN_URL (link to the run's artifacts), COMMENT_MARKER.
set -euo pipefail

if [ "$#" -ne 3 ]; then
  echo "usage: $0 BASE_DIR HEAD_DIR OUT_DIR" >&2
  exit 2
fi
base_dir=$1 head_dir=$2 out=$3
head_cmd=${GPUSCALE_HEAD:-$head_dir/.venv/bin/gpuscale}
base_cmd=${GPUSCALE_BASE:-$base_dir/.venv/bin/gpuscale}
marker=${COMMENT_MARKER:-<!-- gpuscale-pr-preview -->}
sections=$out/sections.md
limit=58000  # every stack's diff together stays under GitHub's 65,536-character comment limit

mkdir -p "$out/synth/base" "$out/synth/head" "$out/diff"
shopt -s nullglob
stack_files=("$head_dir"/stacks/Pulumi.*.yaml)
if [ "${#stack_files[@]}" -eq 0 ]; then
  echo "no stacks/Pulumi.*.yaml in $head_dir" >&2
  exit 2
fi
budget=$(( limit / ${#stack_files[@]} ))
broken=()
: > "$sections"

for file in "${stack_files[@]}"; do
  s=$(basename "$file" .yaml)
  s=${s#Pulumi.}
  echo >> "$sections"
  if ! "$head_cmd" synth --stack-file "$file" --out "$out/synth/head/$s" > "$out/synth/head/$s.log" 2>&1; then
    broken+=("$s")
    { echo "### \`$s\`: the PR's synth failed"; echo; echo '```'; tail -n 40 "$out/synth/head/$s.log"; echo '```'; } >> "$sections"
    continue
  fi
  if [ -f "$base_dir/stacks/Pulumi.$s.yaml" ] && [ -x "$base_cmd" ] \
     && "$base_cmd" synth --stack-file "$base_dir/stacks/Pulumi.$s.yaml" --out "$out/synth/base/$s" \
        > "$out/synth/base/$s.log" 2>&1; then
    rc=0
    # exit 1 means "they differ"; 2 means one side is not a synth directory
    "$head_cmd" diff "$out/synth/base/$s" "$out/synth/head/$s" --markdown --max-chars "$budget" \
      --out "$out/diff/$s.md" > "$out/diff/$s.log" 2>&1 || rc=$?
    if [ "$rc" -gt 1 ]; then
      broken+=("$s")
      { echo "### \`$s\`: the diff failed"; echo; echo '```'; tail -n 20 "$out/diff/$s.log"; echo '```'; } >> "$sections"
    else
      sed "1s/.*/### \`$s\`/" "$out/diff/$s.md" >> "$sections"  # the stack name as the heading
    fi
  else
    echo "### \`$s\`: nothing to compare against (a new stack, or the base cannot synthesize)" >> "$sections"
  fi
  if grep -q '^policy ' "$out/synth/head/$s.log"; then
    { echo; echo "<details><summary>policy findings in \`$s\`</summary>"; echo; echo '```'
      grep '^policy ' "$out/synth/head/$s.log" | cut -c1-400 | head -n 50; echo '```'; echo '</details>'; } >> "$sections"
  fi
done

comment=$out/comment.md
{
  echo "$marker"
  echo "## gpuscale offline preview"
  echo
  if [ "${#broken[@]}" -gt 0 ]; then
    names=$(printf '`%s`, ' "${broken[@]}")
    echo "**This PR breaks ${#broken[@]} stack$([ "${#broken[@]}" -gt 1 ] && echo s): ${names%, }** (why: its section below)."
    echo
  fi
  echo "Every stack synthesized under Pulumi mocks for \`${BASE_REF:-base}\` and this PR (no cloud credentials)."
  if [ -n "${RUN_URL:-}" ]; then
    echo "Full synth output: artifacts \`synth-base\` / \`synth-head\` of [this run]($RUN_URL)."
  fi
  cat "$sections"
} > "$comment"
rm -f "$sections"
[ "${#broken[@]}" -eq 0 ]
