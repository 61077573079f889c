/* unwindlab: everything comes from the one shim header. */
#include "shim.h"
