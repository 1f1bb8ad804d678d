"""The Python module (python/mha_g2p.py) over libmha_g2p: run by ctest with MHA_G2P_LIB
set to the library just built; skipped (exit 77) where python3 is missing."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from mha_g2p import G2P, G2PError, Pronunciation  # noqa: E402


class TestG2P(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g2p = G2P()

    def test_lexicon_then_model(self):
        self.assertEqual(self.g2p.pronounce("hello"), ["HH", "AH0", "L", "OW1"])
        best = self.g2p.nbest("hello", 4)
        self.assertEqual([p.phones for p in best],
                         [["HH", "AH0", "L", "OW1"], ["HH", "EH0", "L", "OW1"]])
        self.assertTrue(all(p.source == "lexicon" and p.word == "HELLO" for p in best))
        model = self.g2p.nbest("hello", 1, lexicon=False)[0]
        self.assertEqual(model.source, "model")
        self.assertLess(model.logprob, 0.0)

    def test_memory(self):
        with G2P(threads=1, model_lexicon=False) as bare:
            with G2P(threads=1) as full:  # the same model and CMUdict as its lexicon
                self.assertGreater(bare.memory(), 11_000_000)  # 2.85 M float32 weights
                self.assertGreater(full.memory() - bare.memory(), 3_000_000)

    def test_nbest_batch_and_stress(self):
        best = self.g2p.nbest("zzyzxq", 3)
        self.assertEqual(len(best), 3)
        self.assertIsInstance(best[0], Pronunciation)
        self.assertEqual([p.source for p in best], ["model"] * 3)
        words = ["cat", "blockchain", "zzyzxq", "self-driving"]
        self.assertEqual(self.g2p.pronounce_batch(words),
                         [self.g2p.pronounce(w) for w in words])
        self.assertEqual(self.g2p.nbest("self-driving", 1)[0].source, "parts")
        nostress = self.g2p.pronounce("blockchain", stress=False)
        self.assertEqual(nostress, [p.rstrip("0123456789") for p in
                                    self.g2p.pronounce("blockchain")])

    def test_rescore(self):
        model = os.path.join(ROOT, "models", "g2p-cmudict.safetensors")
        words = ["zzyzxq", "tokenizer"]
        with G2P(beam=4) as a, G2P(beam=4, rescore=[model], rescore_weight=2.0) as b:
            for w in words:  # rescored by itself: the beam's own order
                self.assertEqual(a.nbest(w, 4, lexicon=False), b.nbest(w, 4, lexicon=False))
        with self.assertRaises(G2PError):
            G2P(rescore=[model], rescore_weight=-1)
        with self.assertRaises(G2PError) as cm:
            G2P(rescore=[os.path.join(ROOT, "data", "cmudict.dict")])
        self.assertIn("cmudict.dict", str(cm.exception))

    def test_errors(self):
        with self.assertRaises(G2PError) as cm:
            self.g2p.pronounce("x1y")
        self.assertIn("character '1'", str(cm.exception))
        self.assertLess(cm.exception.status, 0)
        self.assertEqual(self.g2p.pronounce_batch(["cat", "x1y"], errors="none")[1], None)
        with self.assertRaises(G2PError):
            self.g2p.pronounce_batch(["cat", "x1y"])
        with self.assertRaises(G2PError) as cm:
            G2P(model=os.path.join(ROOT, "data", "cmudict.dict"))
        self.assertIn("cmudict.dict", str(cm.exception))

    def test_own_lexicon_first(self):
        with tempfile.NamedTemporaryFile("w", suffix=".dict", delete=False) as f:
            f.write("HELLO  HH EH1 L OW1\n")
        try:
            with G2P(lexicons=[f.name]) as g:
                self.assertEqual(g.pronounce("Hello"), ["HH", "EH1", "L", "OW1"])
                self.assertEqual(g.pronounce("world"), ["W", "ER1", "L", "D"])
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
