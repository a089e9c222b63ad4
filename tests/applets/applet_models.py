"""The models the applet tests serve: tiny (the default), tiny2, broken (not
offered) and vision with its projector (for "Ask about a screenshot")."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "service"))
import npullm_testbus as tb  # noqa: E402


def model_dir(workdir):
    d = tb.make_model_dir(workdir)
    tb.place_model(tb.env_path("NPULLM_TEST_VISION_MODEL"), os.path.join(d, "vision.gguf"))
    tb.place_model(tb.env_path("NPULLM_TEST_MMPROJ"), os.path.join(d, "vision.mmproj.gguf"))
    return d
