"""Tiny tokenizers of the three families, trained offline on a few sentences."""
from functools import lru_cache

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from structattn.settings import default_encoder

CORPUS = ["the cat sat on the mat .", "unbelievably good film , really !", "New York is big",
          "he did n't go to the U.S. yesterday", "日本語 の 文 です", "emoji 😀 here"] * 20


@lru_cache(maxsize=None)
def wordpiece():
    return AutoTokenizer.from_pretrained(default_encoder())


@lru_cache(maxsize=None)
def byte_level_bpe():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")),
                                                      add_prefix_space=True, trim_offsets=True)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", pad_token="<pad>", unk_token="<unk>", add_prefix_space=True)


@lru_cache(maxsize=None)
def sentencepiece_unigram():
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=120, special_tokens=["<pad>", "<unk>", "[CLS]", "[SEP]"],
                                                            unk_token="<unk>"))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="<pad>",
                                   unk_token="<unk>")


ALL = {"wordpiece": wordpiece, "byte_bpe": byte_level_bpe, "unigram": sentencepiece_unigram}
