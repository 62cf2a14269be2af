/* Wskndk.h: the spelling some sources use for <wskndk.h> (libndk WDK kit). */
#include <wskndk.h>
