/* Stand-in for libxrt_coreutil.so.2 in the discovery tests: exports XRT's
 * C version API (xrtVersionCode = (major << 16) + minor) when built with
 * a version, nothing useful otherwise (an XRT too old to have that API). */
#ifdef FAKE_XRT_MAJOR
unsigned xrtVersionCode(void);
unsigned xrtVersionPatch(void);

unsigned xrtVersionCode(void)
{
    return (FAKE_XRT_MAJOR << 16) + FAKE_XRT_MINOR;
}

unsigned xrtVersionPatch(void)
{
    return FAKE_XRT_PATCH;
}
#else
int fake_xrt_without_version_api(void);

int fake_xrt_without_version_api(void)
{
    return 0;
}
#endif
