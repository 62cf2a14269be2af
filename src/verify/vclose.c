/* The end of a view's verifier: the report of what the view's close left
 * open (rule L17), and freeing its records. Called from the object layer
 * (obj.c frees a view), so nothing here calls back into it. */
#include <stdio.h>
#include <stdlib.h>

#include "net/sys.h"
#include "verify/vcore.h"

void ndk_verify_adapter_closing(struct ndk_adapter_impl *ad)
{
    struct ndk_verifier *v = ad->verifier;
    pthread_mutex_lock(&v->lock);
    v->stop = true;
    pthread_cond_signal(&v->cond);
    unsigned open[NdkObjectTypeMax] = {0}, total = 0;
    for (struct vobj *o = v->objs; o; o = o->next)
        if (o->state == VS_OPEN && o->type != NdkObjectTypeAdapter && o->type < NdkObjectTypeMax) {
            open[o->type]++;
            total++;
        }
    pthread_mutex_unlock(&v->lock);
    if (v->watchdog_started)
        ndk_thread_join(v->watchdog);
    v->watchdog_started = false;
    if (!total)
        return;
    char list[256] = "";
    size_t len = 0;
    for (int t = 0; t < NdkObjectTypeMax; t++)
        if (open[t] && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%u %s", len ? ", " : "",
                                    open[t], vtype_name((NDK_OBJECT_TYPE)t));
    vreport(v->adapter, VR_L17, "ndk_close_adapter",
            "close every object (and wait for its close completion) before closing the adapter",
            "%u object(s) never closed (%s): torn down without callbacks", total, list);
}

void ndk_verify_detach(struct ndk_adapter_impl *ad)
{
    struct ndk_verifier *v = ad->verifier;
    if (!v)
        return;
    if (v->watchdog_started)
        ndk_verify_adapter_closing(ad);
    /* The QPs' records first, while every record they point at exists. */
    struct vobj *lists[2] = {v->objs, v->closed_head};
    for (int i = 0; i < 2; i++)
        for (struct vobj *o = lists[i]; o; o = o->next)
            if (o->type == NdkObjectTypeQp)
                o->vt->closed(o);
    for (int i = 0; i < 2; i++)
        while (lists[i]) {
            struct vobj *o = lists[i];
            lists[i] = o->next;
            free(o);
        }
    while (v->lams) {
        struct vlam *l = v->lams;
        v->lams = l->next;
        free(l);
    }
    pthread_cond_destroy(&v->cond);
    pthread_mutex_destroy(&v->lock);
    free(v);
    ad->verifier = NULL;
}
