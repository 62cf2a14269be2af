/* Wsk.h: the spelling some sources use for <wsk.h> (libndk WDK kit). */
#include <wsk.h>
