"""A word-level tokenizer trained on the training texts, for the embedded offline backbone.

Built with the `tokenizers` library and wrapped as a Hugging Face fast tokenizer, so it saves and loads with
`save_pretrained` / `AutoTokenizer.from_pretrained` exactly like a hub tokenizer: swapping in t5-large is config only.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK, MASK = "<pad>", "</s>", "<unk>", "<mask>"
# Fixed ids, T5 style: pad doubles as the decoder start token. <mask> stands in for a masked leakage term (LAREV E2).
SPECIAL_TOKENS = [PAD, EOS, UNK, MASK]


def train_word_tokenizer(texts: Iterable[str], max_vocab: int = 8000) -> PreTrainedTokenizerFast:
    """Train a lower-cased word-level vocabulary (words and punctuation marks) of at most `max_vocab` entries."""
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    trainer = trainers.WordLevelTrainer(vocab_size=max_vocab, min_frequency=1, special_tokens=SPECIAL_TOKENS)
    tok.train_from_iterator(texts, trainer=trainer)
    eos_id = tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}",
                                                       special_tokens=[(EOS, eos_id)])
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK,
                                   mask_token=MASK, model_max_length=10_000)
