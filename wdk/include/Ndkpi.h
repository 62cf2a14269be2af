/* Ndkpi.h: the spelling some sources use for <ndkpi.h> (libndk WDK kit). */
#include <ndkpi.h>
