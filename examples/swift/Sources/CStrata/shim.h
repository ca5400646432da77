/* The module's one header: the repository's include/strata.h, the C ABI contract. */
#include "../../../../include/strata.h"
