"""Train the byte-level BPE tokenizer with the chat/tool special tokens of domains/chat.py.

    python -m pretrain_ckpt.02_tokenizer --in data/corpus --out checkpoints/tokenizer            # tiny_cpu recipe
    python -m pretrain_ckpt.02_tokenizer --in data/corpus --out /tmp/tok --recipe micro_cpu --vocab-size 1024

Saved as a transformers PreTrainedTokenizerFast directory (tokenizer.json + config + a chat template
that renders exactly domains.chat.render), which transformers and vLLM load. The vocabulary size
is a multiple of 128 so Megatron needs no padding at any TP size up to 128. It is the recipe's model.vocab_size
(the base trained on this tokenizer has that vocabulary), the characters trained on its tokenizer.max_chars;
--vocab-size and --max-chars override them.
"""
from __future__ import annotations

import sys

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m pretrain_ckpt.02_tokenizer ...")

from domains import chat  # noqa: E402
from model import cli, manifest, recipe  # noqa: E402
from model.config import ConfigError  # noqa: E402

# Jinja version of domains.chat.render (tool calls as JSON with keys name, arguments).
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' }}"
    "{% if m['role'] == 'tool' %}{{ '<tool_response>' + (m['content'] or '') + '</tool_response>' }}"
    "{% else %}{{ m['content'] or '' }}{% endif %}"
    "{% for c in (m.get('tool_calls') or []) %}{{ '<tool_call>{\"name\": ' + (c['name'] | tojson) + ', \"arguments\": '"
    " + (c['arguments'] | tojson(sort_keys=True)) + '}</tool_call>' }}{% endfor %}"
    "{{ '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def main(argv=None) -> int:
    ap = cli.parser(__doc__, "pretrain_ckpt", ["tokenizer"], inp="corpus dataset directory (01_corpus.py)",
                    out="tokenizer output directory")
    cli.recipe_args(ap, "pretrain_ckpt", "tokenizer.max_chars=1000000")
    ap.add_argument("--vocab-size", type=int, default=None,
                    help="vocabulary size, a multiple of 128 (overrides the recipe's model.vocab_size)")
    ap.add_argument("--max-chars", type=int, default=None, help="overrides the recipe's tokenizer.max_chars")
    a = ap.parse_args(argv)
    with cli.input_errors():
        cfg = recipe.load_recipe("pretrain_ckpt", a.recipe, a.overrides)
        if a.vocab_size is None:
            if "vocab_size" not in cfg.get("model", {}):
                raise ConfigError(f"recipe {a.recipe} sets no model.vocab_size: pass --vocab-size N")
            a.vocab_size = cfg["model"]["vocab_size"]
        a.max_chars = cfg["tokenizer"]["max_chars"] if a.max_chars is None else a.max_chars
        if a.vocab_size % 128:
            raise ConfigError(f"--vocab-size={a.vocab_size} is not a multiple of 128 (Megatron TP padding); use e.g. "
                              f"{(a.vocab_size // 128 + 1) * 128}")
        manifest.verify(a.inp, stage="corpus")
    import datasets
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    ds = datasets.load_from_disk(str(a.inp / "train"))

    def texts():
        n = 0
        for t in ds["text"]:
            yield t
            n += len(t)
            if n >= a.max_chars:
                return

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=a.vocab_size, special_tokens=chat.SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts(), trainer=trainer)
    if tok.get_vocab_size() != a.vocab_size:
        cli.fail(f"corpus too small for vocab {a.vocab_size} (got {tok.get_vocab_size()}); raise --max-chars")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=chat.BOS, eos_token=chat.EOS,
                                   pad_token=chat.PAD, additional_special_tokens=chat.SPECIAL_TOKENS[2:])
    fast.chat_template = CHAT_TEMPLATE
    tmp = manifest.staging_dir(a.out)
    fast.save_pretrained(str(tmp))
    # The template must render exactly what domains.chat renders (SFT, RL and serving share it).
    sample = [{"role": "user", "content": "hi"},
              {"role": "assistant", "content": "x", "tool_calls": [{"name": "f", "arguments": {"b": 1, "a": "z"}}]},
              {"role": "tool", "name": "f", "content": "ok"}, {"role": "assistant", "content": "done"}]
    rendered = PreTrainedTokenizerFast.from_pretrained(str(tmp)).apply_chat_template(sample, tokenize=False,
                                                                                      add_generation_prompt=True)
    if rendered != chat.render(sample, add_generation_prompt=True):
        print(f"error: chat template disagrees with domains.chat.render:\n{rendered!r}", file=sys.stderr)
        return 1
    manifest.write_manifest(tmp, stage="tokenizer", parent=a.inp, config=vars(a) | {"inp": str(a.inp), "out": str(a.out)},
                            seed=0, metrics={"vocab_size": tok.get_vocab_size()})
    manifest.publish(tmp, a.out)
    print(f"tokenizer: vocab {tok.get_vocab_size()} with {len(chat.SPECIAL_TOKENS)} special tokens -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
