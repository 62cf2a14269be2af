/* Wdm.h: the spelling some sources use for <wdm.h> (libndk WDK kit). */
#include <wdm.h>
