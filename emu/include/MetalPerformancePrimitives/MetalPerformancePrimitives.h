// Stand-in for <MetalPerformancePrimitives/MetalPerformancePrimitives.h>: see emu_tensor.h.
#pragma once
#include "../emu_prelude.h"
#include "../emu_tensor.h"
