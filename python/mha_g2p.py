"""Pronunciations of words from Python, through the C library libmha_g2p (ctypes only:
no build step, nothing to install from PyPI).

    from mha_g2p import G2P
    g2p = G2P()                          # the committed model + the dictionary it learned
    g2p.pronounce("hello")               # ['HH', 'AH0', 'L', 'OW1']   (from the dictionary)
    g2p.pronounce("blockchain")          # ['B', 'L', 'AA1', 'K', 'CH', 'EY2', 'N']  (model)
    g2p.nbest("zzyzxq", 3)               # [Pronunciation(word='ZZYZXQ', phones=[...],
                                         #   logprob=-1.46, source='model'), ...]
    g2p.pronounce_batch(["cat", "dog"])  # one call, the model's words decoded in batches
    G2P(ensemble=[...], rescore=[...], beam=4)   # more models: averaged, or rescoring

Where things are found (each can be given instead):
  the library  $MHA_G2P_LIB, else the build tree or install prefix beside this file, else
               the system's loader (libmha_g2p.so.0);
  the model    $MHA_G2P_MODEL, else models/g2p-cmudict.safetensors beside this file's
               folder (the source tree, or share/mha of an install);
  the lexicon  the dictionary the model was trained on (its file names it), looked up
               the same way; lexicons=[...] adds your own, searched first.
A handle is for one thread at a time; make one per thread.
"""
import ctypes
import os
import warnings
from collections import namedtuple

__all__ = ["G2P", "G2PError", "Pronunciation"]

Pronunciation = namedtuple("Pronunciation", "word phones logprob source")
_SOURCES = {1: "lexicon", 2: "parts", 3: "model"}
_NO_STRESS, _NO_LEXICON = 1, 2
_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)  # the source tree, or <prefix>/share/mha


class G2PError(Exception):
    """A status of the library (a negative MHA_ code) and its message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _Pron(ctypes.Structure):
    _fields_ = [("phones", ctypes.c_char_p), ("word", ctypes.c_char_p),
                ("logprob", ctypes.c_double), ("source", ctypes.c_int),
                ("lexicon", ctypes.c_int)]


def _load_library(path=None):
    tries = [path, os.environ.get("MHA_G2P_LIB"),
             os.path.join(_ROOT, "build", "libmha_g2p.so.0"),
             os.path.join(_ROOT, "..", "..", "lib", "libmha_g2p.so.0"),
             "libmha_g2p.so.0"]
    errors = []
    for p in tries:
        if not p or (os.sep in p and not os.path.exists(p)):
            continue
        try:
            lib = ctypes.CDLL(p)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("libmha_g2p.so.0 not found (set MHA_G2P_LIB): " + "; ".join(errors))
    vp, sz, cp, ci = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int
    lib.mha_g2p_open.argtypes = [ctypes.POINTER(vp), cp, ci, cp, sz]
    lib.mha_g2p_close.argtypes = [vp]
    lib.mha_g2p_close.restype = None
    lib.mha_g2p_add_model.argtypes = [vp, cp, cp, sz]
    lib.mha_g2p_add_rescorer.argtypes = [vp, cp, cp, sz]
    lib.mha_g2p_set_rescore_weight.argtypes = [vp, ctypes.c_double]
    lib.mha_g2p_add_lexicon.argtypes = [vp, cp, ctypes.POINTER(sz), cp, sz]
    lib.mha_g2p_set_beam.argtypes = [vp, sz, ctypes.c_double]
    lib.mha_g2p_pronounce_batch.argtypes = [vp, sz, ctypes.POINTER(cp), ctypes.c_uint, sz,
                                            ctypes.POINTER(_Pron), ctypes.POINTER(sz),
                                            ctypes.POINTER(ci), cp, sz]
    lib.mha_g2p_memory.argtypes = [vp, ctypes.POINTER(sz)]
    lib.mha_g2p_model_data.argtypes = [vp]
    lib.mha_g2p_model_data.restype = cp
    return lib


def _find(rel):
    """A path as given if it exists, else under this module's root."""
    if os.path.exists(rel) or os.path.isabs(rel):
        return rel
    return os.path.join(_ROOT, rel)


class G2P:
    """A model of mha-g2p train with lexicons looked up first (see the module's text)."""

    def __init__(self, model=None, lexicons=(), model_lexicon=True, ensemble=(),
                 beam=1, alpha=1.0, threads=1, library=None, rescore=(), rescore_weight=1.0):
        self._lib = _load_library(library)
        self._g = ctypes.c_void_p()
        model = model or os.environ.get("MHA_G2P_MODEL") or \
            _find("models/g2p-cmudict.safetensors")
        self._call(self._lib.mha_g2p_open, ctypes.byref(self._g), model.encode(), threads)
        for m in ensemble:
            self._call(self._lib.mha_g2p_add_model, self._g, os.fsencode(m))
        for m in rescore:  # models that rescore the beam's list (beam >= 2)
            self._call(self._lib.mha_g2p_add_rescorer, self._g, os.fsencode(m))
        if self._lib.mha_g2p_set_rescore_weight(self._g, rescore_weight) != 0:
            raise G2PError(-1, "rescore_weight %r is not in [0, 100]" % (rescore_weight,))
        self.lexicons = [os.fspath(p) for p in lexicons]
        if model_lexicon:
            data = self._lib.mha_g2p_model_data(self._g).decode()
            if data and os.path.exists(_find(data)):
                self.lexicons.append(_find(data))
            elif data:
                warnings.warn("%s, the dictionary the model was trained on, is not there: "
                              "the model answers every word" % data)
        for p in self.lexicons:
            self._call(self._lib.mha_g2p_add_lexicon, self._g, os.fsencode(p), None)
        self._call(self._lib.mha_g2p_set_beam, self._g, beam, alpha, with_err=False)

    def _call(self, fn, *args, with_err=True):
        err = ctypes.create_string_buffer(1024)
        st = fn(*args, err, len(err)) if with_err else fn(*args)
        if st != 0:
            raise G2PError(st, err.value.decode(errors="replace") if with_err else
                           "invalid decoding options")

    def memory(self):
        """The bytes the handle holds and will hold to decode (mha_g2p_memory): the models'
        weights, every decoding state at its thread count and beam, the lexicons."""
        b = ctypes.c_size_t()
        st = self._lib.mha_g2p_memory(self._g, ctypes.byref(b))
        if st != 0:
            raise G2PError(st, "mha_g2p_memory: the handle is closed or the sizes overflow")
        return b.value

    def close(self):
        if getattr(self, "_g", None):
            self._lib.mha_g2p_close(self._g)
            self._g = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _batch(self, words, n, stress, lexicon, errors):
        words = list(words)
        flags = (0 if stress else _NO_STRESS) | (0 if lexicon else _NO_LEXICON)
        arr = (ctypes.c_char_p * max(len(words), 1))(*[w.encode() for w in words])
        out = (_Pron * max(len(words) * n, 1))()
        n_out = (ctypes.c_size_t * max(len(words), 1))()
        status = (ctypes.c_int * max(len(words), 1))()
        err = ctypes.create_string_buffer(1024)
        st = self._lib.mha_g2p_pronounce_batch(self._g, len(words), arr, flags, n, out, n_out,
                                               status, err, len(err))
        failed_call = all(s == 0 for s in status[:len(words)])  # not one word's fault
        if st != 0 and (errors == "raise" or failed_call):
            raise G2PError(st, err.value.decode(errors="replace"))
        res = []
        for i in range(len(words)):
            if status[i] != 0:
                res.append(None)
                continue
            res.append([Pronunciation(out[i * n + k].word.decode(),
                                      out[i * n + k].phones.decode().split(),
                                      out[i * n + k].logprob,
                                      _SOURCES[out[i * n + k].source])
                        for k in range(n_out[i])])
        return res

    def nbest(self, word, n=4, stress=True, lexicon=True):
        """Up to n pronunciations of word, best first, as Pronunciation tuples."""
        return self._batch([word], n, stress, lexicon, "raise")[0]

    def pronounce(self, word, stress=True, lexicon=True):
        """The best pronunciation of word as a list of phones (G2PError if it cannot)."""
        return self.nbest(word, 1, stress, lexicon)[0].phones

    def pronounce_batch(self, words, stress=True, lexicon=True, errors="raise"):
        """The best pronunciation of each word; errors="none" gives None for a word that
        cannot be pronounced instead of raising."""
        res = self._batch(words, 1, stress, lexicon, errors)
        return [r[0].phones if r else None for r in res]
