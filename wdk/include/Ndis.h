/* Ndis.h: the spelling some sources use for <ndis.h> (libndk WDK kit). */
#include <ndis.h>
